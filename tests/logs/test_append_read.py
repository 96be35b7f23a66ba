"""Append and read: offsets in order per partition, batches, replay, transactions, input checks."""

from __future__ import annotations

import pytest
from django.db import connections, transaction
from django.test import override_settings

from later_django.engine.topics import register_topic
from later_django.exceptions import TopicLayoutMismatch, TopicNotConfigured
from later_django.logs import log
from later_django.storage.stores import stores_for
from tests.storage import three_databases

#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def record_count(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_log_record")
        return cursor.fetchone()[0]


def partition_rows(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_log_partition")
        return cursor.fetchone()[0]


def test_appends_get_contiguous_offsets_per_partition_and_read_returns_them(log_db: str) -> None:
    events = log("events")
    placed = [events.append(f"customer-{n % 5}", f"payload {n}".encode()) for n in range(40)]

    by_partition: dict[int, list[int]] = {}
    for partition, offset in placed:
        by_partition.setdefault(partition, []).append(offset)
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), partition
    records = [r for p in range(4) for r in events.read(p, 0, limit=1000)]
    assert sorted((r.partition, r.offset) for r in records) == sorted(placed)
    for record in records:
        n = int(record.payload.split()[1])
        assert record.key == f"customer-{n % 5}".encode()
        assert record.topic == "events"
        assert (record.partition, record.offset) == placed[n]
        assert record.partition == events.partition_for(record.key)
    assert events.end_offsets() == {p: len(by_partition.get(p, [])) for p in range(4)}


def test_one_key_keeps_its_order_and_replay_starts_from_the_middle(log_db: str) -> None:
    events = log("events")
    placed = [events.append("account-7", f"{n}".encode()) for n in range(10)]
    partition = placed[0][0]
    assert placed == [(partition, n) for n in range(10)]

    replay = events.read(partition, 6, limit=100)
    assert [(r.offset, r.payload) for r in replay] == [(n, f"{n}".encode()) for n in range(6, 10)]
    assert [r.offset for r in events.read(partition, 2, limit=3)] == [2, 3, 4]
    assert events.read(partition, 10) == []


def test_append_many_assigns_offsets_in_input_order_in_one_batch(log_db: str) -> None:
    single = log("single")
    single.append("first", b"0")
    batch = [(f"k{n}", f"{n}".encode()) for n in range(1, 2501)]
    placed = single.append_many(batch)

    assert placed == [(0, n) for n in range(1, 2501)]
    read = single.read(0, 0, limit=5000)
    assert [r.offset for r in read] == list(range(2501))
    assert [r.payload for r in read[1:]] == [payload for _, payload in batch]


def test_append_many_over_partitions_returns_positions_in_input_order(log_db: str) -> None:
    events = log("events")
    batch = [(f"user-{n % 9}", f"{n}".encode()) for n in range(300)]
    placed = events.append_many(batch)

    expected_next: dict[int, int] = {}
    for (key, payload), (partition, offset) in zip(batch, placed, strict=True):
        assert partition == events.partition_for(key)
        assert offset == expected_next.get(partition, 0)
        expected_next[partition] = offset + 1
        (record,) = events.read(partition, offset, limit=1)
        assert (record.offset, record.payload) == (offset, payload)


def test_a_rolled_back_append_leaves_no_record_and_no_gap(log_db: str) -> None:
    single = log("single")
    single.append("a", b"kept")
    with pytest.raises(RuntimeError, match="caller failed"), transaction.atomic(using=log_db):
        single.append("b", b"rolled back")
        single.append_many([("c", b"rolled back too"), (None, b"and this")])
        raise RuntimeError("caller failed")

    assert record_count(log_db) == 1
    assert single.append("d", b"next") == (0, 1)
    assert [r.payload for r in single.read(0)] == [b"kept", b"next"]


def test_an_append_inside_a_committed_transaction_is_kept(log_db: str) -> None:
    single = log("single")
    with transaction.atomic(using=log_db):
        assert single.append("a", b"one") == (0, 0)
        assert single.append_many([("b", b"two"), ("c", b"three")]) == [(0, 1), (0, 2)]
    assert [r.payload for r in single.read(0)] == [b"one", b"two", b"three"]


def test_keys_are_stored_as_bytes_and_keyless_records_are_spread(log_db: str) -> None:
    events = log("events")
    events.append(b"\x00raw", b"1")
    events.append(42, b"2")
    keyless = events.append_many([(None, b"x")] * 8)

    assert {partition for partition, _ in keyless} == {0, 1, 2, 3}
    stored = {r.payload: r.key for p in range(4) for r in events.read(p, 0, limit=100)}
    assert stored[b"1"] == b"\x00raw"
    assert stored[b"2"] == b"42"
    assert stored[b"x"] is None


def test_a_str_payload_or_bad_key_is_refused_and_nothing_is_written(log_db: str) -> None:
    events = log("events")
    with pytest.raises(TypeError, match=r"record 1: payload must be bytes, got str"):
        events.append_many([("a", b"fine"), ("b", "text")])
    with pytest.raises(TypeError, match=r"record 0: key must be str, bytes, int or None"):
        events.append(1.5, b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"record 0 must be a \(key, payload\) pair"):
        events.append_many([b"only payload"])  # type: ignore[list-item]
    assert record_count(log_db) == 0
    assert partition_rows(log_db) == 0


def test_read_checks_partition_offset_and_limit(log_db: str) -> None:
    events = log("events")
    with pytest.raises(ValueError, match=r"partition 4 is out of range for topic 'events'"):
        events.read(4, 0)
    with pytest.raises(ValueError, match=r"offset must be a non-negative int, got -1"):
        events.read(0, -1)
    with pytest.raises(ValueError, match=r"limit must be a positive int, got 0"):
        events.read(0, 0, limit=0)


def test_an_unconfigured_topic_is_refused_by_name_and_nothing_is_written(log_db: str) -> None:
    with pytest.raises(TopicNotConfigured, match=r"topic 'invoices' is not configured"):
        log("invoices").append("a", b"x")
    with pytest.raises(TopicNotConfigured, match=r"reserved"):
        log("__later_recurring__")
    assert record_count(log_db) == 0
    assert partition_rows(log_db) == 0


def test_a_topic_stored_with_another_partition_count_is_refused(log_db: str) -> None:
    register_topic(stores_for(log_db), "default", "wide", 8)
    with (
        override_settings(
            LATER={
                "NAMESPACE": "default",
                "DATABASE": log_db,
                "TOPICS": {"wide": {"partitions": 2}},
            }
        ),
        pytest.raises(TopicLayoutMismatch, match=r"has 8 partitions in the database"),
    ):
        log("wide").append("a", b"x")
    assert record_count(log_db) == 0
