"""PartitionStore on SQLite, PostgreSQL and MariaDB: sequences, heads, leases, and the
head repair. MariaDB runs here through this module's own ``db_alias``
(tests/storage/three_databases.py)."""

from __future__ import annotations

import pytest
from django.db import connections

from later_django.core import rendezvous
from later_django.core.clock import now_ms
from later_django.storage.partitions import PartitionEntry
from later_django.storage.stores import stores_for
from tests.partitions.conftest import NAMESPACE, TOPIC
from tests.partitions.support import fetch, heads, partition_rows
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias


def _entry(sequence: int, job_id: str, partition: int = 0, stage: str = "enqueued"):
    return PartitionEntry(TOPIC, partition, sequence, job_id, 1000 + sequence, stage)


def test_allocation_is_consecutive_per_partition_and_needs_the_registered_count(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).partitions
    assert store.allocate(NAMESPACE, [(TOPIC, 0, 3, 8)]) == {}, "unregistered topic: nothing"
    # The topic's row as the topic store writes it (its statements are not tested here).
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "INSERT INTO later_topic (namespace, topic, partitions, created_at) "
            "VALUES (%s, %s, 8, 0)",
            [NAMESPACE, TOPIC],
        )
    assert store.allocate(NAMESPACE, [(TOPIC, 0, 3, 8), (TOPIC, 5, 1, 8)]) == {
        (TOPIC, 0): 1,
        (TOPIC, 5): 1,
    }
    assert store.allocate(NAMESPACE, [(TOPIC, 0, 2, 8)]) == {(TOPIC, 0): 4}
    # Another count than the registered one allocates nothing.
    assert store.allocate(NAMESPACE, [(TOPIC, 0, 1, 4)]) == {}
    assert fetch(
        db_alias,
        "SELECT partition_id, next_sequence FROM later_partition_sequence ORDER BY partition_id",
    ) == [(0, 6), (5, 2)]


def test_enter_sets_a_head_only_where_there_is_none(db_alias: str) -> None:
    store = stores_for(db_alias).partitions
    store.enter(NAMESPACE, [_entry(1, "A"), _entry(2, "B")])
    store.enter(NAMESPACE, [_entry(3, "C"), _entry(1, "X", partition=1, stage="delayed")])
    assert [(*row[:4], row[5]) for row in heads(db_alias)] == [
        (TOPIC, 0, 1, "A", "enqueued"),
        (TOPIC, 1, 1, "X", "delayed"),
    ]
    assert [row[3] for row in partition_rows(db_alias)] == ["A", "B", "C", "X"]


def test_advance_moves_the_head_to_the_next_row_or_drops_it(db_alias: str) -> None:
    store = stores_for(db_alias).partitions
    store.enter(NAMESPACE, [_entry(1, "A"), _entry(2, "B"), _entry(1, "Z", partition=1)])
    store.advance(NAMESPACE, [(TOPIC, 0), (TOPIC, 1)], exits=["A", "Z"])
    # B has no index row in this storage-level test: its stage defaults to enqueued.
    assert [row[:5] for row in heads(db_alias)] == [(TOPIC, 0, 2, "B", 1002)]
    store.advance(NAMESPACE, [(TOPIC, 0)], run_at={"B": 5000})
    assert heads(db_alias)[0][4] == 5000
    store.advance(NAMESPACE, [(TOPIC, 0)], exits=["B"])
    assert heads(db_alias) == []
    assert partition_rows(db_alias) == []


def test_a_missing_head_is_materialized_from_the_lowest_row(db_alias: str) -> None:
    store = stores_for(db_alias).partitions
    store.enter(NAMESPACE, [_entry(4, "D"), _entry(5, "E")])
    # The race's outcome: rows without a head.
    fetch_delete = "DELETE FROM later_partition_head"
    with connections[db_alias].cursor() as cursor:
        cursor.execute(fetch_delete)
    store.materialize_heads(NAMESPACE, [(TOPIC, 0), (TOPIC, 1)])
    assert [row[:4] for row in heads(db_alias)] == [(TOPIC, 0, 4, "D")]
    # An existing head is left alone.
    store.materialize_heads(NAMESPACE, [(TOPIC, 0)])
    assert [row[:4] for row in heads(db_alias)] == [(TOPIC, 0, 4, "D")]


def test_claims_read_only_heads_of_partitions_the_owner_holds(db_alias: str) -> None:
    store = stores_for(db_alias).partitions
    now = now_ms()
    store.enter(
        NAMESPACE,
        [
            PartitionEntry(TOPIC, 0, 1, "A", now, "enqueued"),
            PartitionEntry(TOPIC, 0, 2, "A2", now, "enqueued"),
            PartitionEntry(TOPIC, 1, 1, "B", now + 60_000, "delayed"),
            PartitionEntry(TOPIC, 2, 1, "C", now - 1, "requeued"),
            PartitionEntry(TOPIC, 3, 1, "W", now, "waiting"),
            PartitionEntry(TOPIC, 4, 1, "N", now, "enqueued"),
        ],
    )
    held = store.take(NAMESPACE, "me", [(TOPIC, p) for p in range(4)], now + 30_000, now)
    assert set(held) == {(TOPIC, p) for p in range(4)}
    claims = store.claim_heads(NAMESPACE, "me", now, [], 16)
    # A (enqueued) and C (requeued, due); not B (delayed, not due), W (waiting), N (not held).
    assert sorted(claim.job_id for claim in claims) == ["A", "C"]
    assert {claim.epoch for claim in claims} == {1}
    assert store.claim_heads(NAMESPACE, "me", now, ["A"], 16)[0].job_id == "C"
    assert store.claim_heads(NAMESPACE, "someone-else", now, [], 16) == []


def test_rendezvous_spreads_partitions_and_moves_few_when_a_worker_joins() -> None:
    partitions = [(TOPIC, p) for p in range(64)]
    two = {p: rendezvous.owner(["w1", "w2"], *p) for p in partitions}
    three = {p: rendezvous.owner(["w1", "w2", "w3"], *p) for p in partitions}
    assert 16 <= sum(owner == "w1" for owner in two.values()) <= 48
    # Only partitions now preferred by the newcomer change hands.
    assert all(three[p] in (two[p], "w3") for p in partitions)
    assert any(owner == "w3" for owner in three.values())


def _partition_statements(db_alias: str, call) -> int:  # type: ignore[no-untyped-def]
    """How many statements on the partition tables ``call()`` ran."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connections[db_alias]) as captured:
        call()
    return sum("later_partition_" in query["sql"] for query in captured.captured_queries)


def test_a_finish_reads_and_advances_its_partitions_in_as_many_statements_for_one_or_seven(
    db_alias: str,
) -> None:
    """``next_rows`` and ``advance`` of a finish take the same number of statements for
    one partition as for seven: one each on PostgreSQL; on SQLite and MariaDB one read,
    and three writes (the rows deleted, the heads recomputed, the empty ones dropped). Before,
    SQLite ran a read, a recompute and a drop per partition: 7 and 15 statements for
    seven, inside the write lock the other worker processes wait for."""
    store = stores_for(db_alias).partitions
    store.enter(NAMESPACE, [_entry(n, f"J{n}", partition=n % 8) for n in range(1, 33)])

    def counts(partitions: list, leaving: list[str]) -> tuple[int, int]:  # type: ignore[type-arg]
        read = _partition_statements(
            db_alias, lambda: store.next_rows(NAMESPACE, partitions, leaving, now_ms())
        )
        advanced = _partition_statements(
            db_alias, lambda: store.advance(NAMESPACE, partitions, exits=leaving)
        )
        return read, advanced

    one = counts([(TOPIC, 1)], ["J1"])
    seven = counts([(TOPIC, p) for p in (2, 3, 4, 5, 6, 7, 0)], [f"J{n}" for n in range(2, 9)])
    assert seven == one
    # Each partition's head moved to its next row.
    assert sorted(row[3] for row in heads(db_alias)) == sorted(f"J{n}" for n in range(9, 17))
