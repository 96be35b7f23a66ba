"""Conformance of ``LogPort`` (``stores_for(alias).log``) on SQLite, PostgreSQL and MariaDB:
partition ends, consumer-group offsets and reads, members, and the fenced offset commit,
as the port's docstrings state."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections, transaction

from later_django.storage.leases import Lease
from later_django.storage.stores import stores_for
from tests.storage import three_databases
from tests.threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

NS = "ns"
TOPIC = "events"
OTHER_TOPIC = "other-events"
T = 1_000_000


def offset_rows(db_alias: str, group: str, topic: str = TOPIC) -> dict[int, int]:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT partition_id, next_offset FROM later_log_consumer_offset "
            "WHERE namespace = %s AND group_name = %s AND topic = %s",
            [NS, group, topic],
        )
        return dict(cursor.fetchall())


def member_rows(db_alias: str, group: str) -> dict[str, int]:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT member_id, heartbeat_at FROM later_log_consumer_member "
            "WHERE namespace = %s AND group_name = %s AND topic = %s",
            [NS, group, TOPIC],
        )
        return dict(cursor.fetchall())


def append(db_alias: str, partition: int, count: int, topic: str = TOPIC) -> list[int]:
    records = [(partition, None, f"{partition}:{n}".encode()) for n in range(count)]
    return stores_for(db_alias).log.append(NS, topic, T, records)


# --- partition_ends ---


def test_partition_ends_are_the_next_offsets_of_partitions_that_had_records(
    db_alias: str,
) -> None:
    log = stores_for(db_alias).log
    assert log.partition_ends(NS, TOPIC) == {}
    assert append(db_alias, 0, 3) == [0, 1, 2]
    assert append(db_alias, 2, 1) == [0]
    append(db_alias, 1, 5, topic=OTHER_TOPIC)
    assert log.partition_ends(NS, TOPIC) == {0: 3, 2: 1}
    assert log.partition_ends(NS, OTHER_TOPIC) == {1: 5}
    assert log.partition_ends("elsewhere", TOPIC) == {}


def test_partition_ends_keep_the_end_when_records_are_cleaned_up(db_alias: str) -> None:
    log = stores_for(db_alias).log
    append(db_alias, 0, 4)
    assert log.cleanup(NS, TOPIC, 0, T + 1, 0) == 4
    assert log.read(NS, TOPIC, 0, 0, 10) == []
    assert log.partition_ends(NS, TOPIC) == {0: 4}, "a partition that ever had a record"


# --- group_ensure, group_offsets, topic_groups ---


def test_group_ensure_creates_free_leases_and_zero_offsets(db_alias: str) -> None:
    log = stores_for(db_alias).log
    log.group_ensure(NS, "g", TOPIC, 3, T)
    assert log.group_offsets(NS, "g", TOPIC) == {0: 0, 1: 0, 2: 0}
    assert log.leases.leases((NS, "g", TOPIC)) == {(p,): Lease((p,), None, 0, 0) for p in range(3)}


def test_group_ensure_adds_only_missing_rows(db_alias: str) -> None:
    log = stores_for(db_alias).log
    log.group_ensure(NS, "g", TOPIC, 2, T)
    assert log.leases.take((NS, "g", TOPIC), "m", [(0,)], until_ms=T + 500, now_ms=T) == {(0,): 1}
    assert log.offset_commit(NS, "g", TOPIC, 0, "m", 1, 7, T) is True
    log.group_ensure(NS, "g", TOPIC, 4, T + 10)
    assert log.group_offsets(NS, "g", TOPIC) == {0: 7, 1: 0, 2: 0, 3: 0}
    assert log.leases.leases((NS, "g", TOPIC)) == {
        (0,): Lease((0,), "m", T + 500, 1),
        (1,): Lease((1,), None, 0, 0),
        (2,): Lease((2,), None, 0, 0),
        (3,): Lease((3,), None, 0, 0),
    }


def test_group_offsets_are_one_groups_next_offsets_on_one_topic(db_alias: str) -> None:
    log = stores_for(db_alias).log
    assert log.group_offsets(NS, "g", TOPIC) == {}
    log.group_ensure(NS, "g", TOPIC, 2, T)
    log.group_ensure(NS, "h", TOPIC, 3, T)
    log.group_ensure(NS, "g", OTHER_TOPIC, 1, T)
    log.leases.hold((NS, "g", TOPIC), "m", [1], until_ms=T + 500, now_ms=T)
    assert log.offset_commit(NS, "g", TOPIC, 1, "m", 1, 12, T) is True
    assert log.group_offsets(NS, "g", TOPIC) == {0: 0, 1: 12}
    assert log.group_offsets(NS, "h", TOPIC) == {0: 0, 1: 0, 2: 0}
    assert log.group_offsets(NS, "g", OTHER_TOPIC) == {0: 0}


def test_topic_groups_are_the_groups_with_offsets_on_the_topic(db_alias: str) -> None:
    log = stores_for(db_alias).log
    assert log.topic_groups(NS, TOPIC) == []
    for group, topic in [("zeta", TOPIC), ("alpha", TOPIC), ("solo", OTHER_TOPIC)]:
        log.group_ensure(NS, group, topic, 1, T)
        log.leases.hold((NS, group, topic), "m", [0], until_ms=T + 500, now_ms=T)
        assert log.offset_commit(NS, group, topic, 0, "m", 1, 1, T) is True
    assert log.topic_groups(NS, TOPIC) == ["alpha", "zeta"]
    assert log.topic_groups(NS, OTHER_TOPIC) == ["solo"]
    log.drop_group(NS, "zeta", TOPIC)
    assert log.topic_groups(NS, TOPIC) == ["alpha"]


# --- group_read ---


def test_group_read_reads_from_the_groups_committed_offset(db_alias: str) -> None:
    log = stores_for(db_alias).log
    append(db_alias, 0, 5)
    append(db_alias, 1, 2)
    log.group_ensure(NS, "g", TOPIC, 2, T)
    assert [r[0] for r in log.group_read(NS, "g", TOPIC, 0, 10)] == [0, 1, 2, 3, 4]
    log.leases.hold((NS, "g", TOPIC), "m", [0], until_ms=T + 500, now_ms=T)
    assert log.offset_commit(NS, "g", TOPIC, 0, "m", 1, 2, T) is True
    assert log.group_read(NS, "g", TOPIC, 0, 10) == [
        (2, None, b"0:2", T),
        (3, None, b"0:3", T),
        (4, None, b"0:4", T),
    ]
    assert [r[0] for r in log.group_read(NS, "g", TOPIC, 0, 2)] == [2, 3]
    assert [r[2] for r in log.group_read(NS, "g", TOPIC, 1, 10)] == [b"1:0", b"1:1"]
    assert log.offset_commit(NS, "g", TOPIC, 0, "m", 1, 5, T) is True
    assert log.group_read(NS, "g", TOPIC, 0, 10) == [], "everything committed"


def test_group_read_without_an_offset_row_reads_nothing(db_alias: str) -> None:
    log = stores_for(db_alias).log
    append(db_alias, 0, 3)
    assert log.group_read(NS, "never-joined", TOPIC, 0, 10) == []
    log.group_ensure(NS, "g", TOPIC, 1, T)  # partition 0 only
    append(db_alias, 1, 3)
    assert log.group_read(NS, "g", TOPIC, 1, 10) == []
    assert len(log.group_read(NS, "g", TOPIC, 0, 10)) == 3


# --- members ---


def test_member_beat_joins_and_refreshes_and_members_live_reads_the_live_set(
    db_alias: str,
) -> None:
    log = stores_for(db_alias).log
    log.member_beat(NS, "g", TOPIC, "a", T + 100)
    log.member_beat(NS, "g", TOPIC, "b", T + 200)
    log.member_beat(NS, "g", TOPIC, "c", T + 300)
    log.member_beat(NS, "other-group", TOPIC, "x", T + 999)
    assert member_rows(db_alias, "g") == {"a": T + 100, "b": T + 200, "c": T + 300}
    assert log.members_live(NS, "g", TOPIC, T + 200) == ["b", "c"], "at or after"
    assert log.members_live(NS, "g", TOPIC, T + 301) == []
    log.member_beat(NS, "g", TOPIC, "a", T + 500)
    assert member_rows(db_alias, "g") == {"a": T + 500, "b": T + 200, "c": T + 300}
    assert log.members_live(NS, "g", TOPIC, T + 400) == ["a"]
    assert log.members_live(NS, "other-group", TOPIC, 0) == ["x"]


def test_member_remove_deletes_one_members_row(db_alias: str) -> None:
    log = stores_for(db_alias).log
    log.member_beat(NS, "g", TOPIC, "a", T)
    log.member_beat(NS, "g", TOPIC, "b", T)
    log.member_beat(NS, "h", TOPIC, "a", T)
    log.member_remove(NS, "g", TOPIC, "a")
    assert log.members_live(NS, "g", TOPIC, 0) == ["b"]
    assert log.members_live(NS, "h", TOPIC, 0) == ["a"]
    log.member_remove(NS, "g", TOPIC, "a")  # already gone
    assert member_rows(db_alias, "g") == {"b": T}


def test_members_purge_deletes_members_silent_since_before_the_cut_off(db_alias: str) -> None:
    log = stores_for(db_alias).log
    log.member_beat(NS, "g", TOPIC, "old-1", T + 100)
    log.member_beat(NS, "g", TOPIC, "old-2", T + 199)
    log.member_beat(NS, "g", TOPIC, "edge", T + 200)
    log.member_beat(NS, "g", TOPIC, "new", T + 300)
    log.member_beat(NS, "h", TOPIC, "old-elsewhere", T)
    assert log.members_purge(NS, "g", TOPIC, T + 200) == 2
    assert member_rows(db_alias, "g") == {"edge": T + 200, "new": T + 300}
    assert log.members_purge(NS, "g", TOPIC, T + 200) == 0
    assert member_rows(db_alias, "h") == {"old-elsewhere": T}


# --- offset_commit ---


def test_offset_commit_by_the_lease_holder_at_its_epoch_sets_the_offset(db_alias: str) -> None:
    log = stores_for(db_alias).log
    log.group_ensure(NS, "g", TOPIC, 2, T)
    assert log.leases.hold((NS, "g", TOPIC), "m1", [0, 1], until_ms=T + 500, now_ms=T) == {
        0: 1,
        1: 1,
    }
    assert log.offset_commit(NS, "g", TOPIC, 0, "m1", 1, 3, T + 1) is True
    assert offset_rows(db_alias, "g") == {0: 3, 1: 0}


def test_offset_commit_with_a_stale_epoch_or_by_another_owner_changes_nothing(
    db_alias: str,
) -> None:
    log = stores_for(db_alias).log
    scope = (NS, "g", TOPIC)
    log.group_ensure(NS, "g", TOPIC, 1, T)
    assert log.leases.hold(scope, "m1", [0], until_ms=T + 100, now_ms=T) == {0: 1}
    assert log.offset_commit(NS, "g", TOPIC, 0, "m1", 1, 4, T) is True
    assert log.offset_commit(NS, "g", TOPIC, 0, "m1", 2, 9, T) is False, "wrong epoch"
    assert log.offset_commit(NS, "g", TOPIC, 0, "m2", 1, 9, T) is False, "not the owner"
    assert offset_rows(db_alias, "g") == {0: 4}
    # m1's lease lapses and m2 takes it over (epoch 2): m1's late commit is fenced off.
    assert log.leases.hold(scope, "m2", [0], until_ms=T + 900, now_ms=T + 200) == {0: 2}
    assert log.offset_commit(NS, "g", TOPIC, 0, "m1", 1, 9, T + 201) is False
    assert offset_rows(db_alias, "g") == {0: 4}
    assert log.offset_commit(NS, "g", TOPIC, 0, "m2", 2, 6, T + 202) is True
    assert offset_rows(db_alias, "g") == {0: 6}


def test_offset_commit_without_a_lease_or_offset_row_returns_false(db_alias: str) -> None:
    log = stores_for(db_alias).log
    assert log.offset_commit(NS, "g", TOPIC, 0, "m", 0, 1, T) is False, "the group never joined"
    log.group_ensure(NS, "g", TOPIC, 1, T)
    # A free lease row (owner none, epoch 0) is nobody's.
    assert log.offset_commit(NS, "g", TOPIC, 0, "m", 0, 1, T) is False
    log.leases.hold((NS, "g", TOPIC), "m", [0], until_ms=T + 100, now_ms=T)
    assert log.offset_commit(NS, "g", TOPIC, 5, "m", 1, 1, T) is False, "no such partition"
    assert offset_rows(db_alias, "g") == {0: 0}
    log.leases.release((NS, "g", TOPIC), "m")
    assert log.offset_commit(NS, "g", TOPIC, 0, "m", 1, 1, T) is False, "released"
    assert offset_rows(db_alias, "g") == {0: 0}


# --- the commit's fence against a concurrent takeover (two connections) ---


def test_a_stale_epochs_commit_waits_for_the_takeover_in_flight_and_is_refused(
    db_alias: str,
) -> None:
    """``m2`` has taken over the lapsed lease (epoch 2) in a transaction not yet
    committed; ``m1``'s commit at epoch 1 waits for it, then finds the lease moved on
    and changes nothing (not the offset as of before the takeover)."""
    if connections[db_alias].vendor == "sqlite":
        pytest.skip("SQLite serialises write transactions: no commit runs beside a takeover")
    log = stores_for(db_alias).log
    scope = (NS, "g", TOPIC)
    log.group_ensure(NS, "g", TOPIC, 1, T)
    assert log.leases.hold(scope, "m1", [0], until_ms=T + 100, now_ms=T) == {0: 1}
    took = threading.Event()

    def take_over() -> dict:
        with transaction.atomic(using=db_alias):
            held = stores_for(db_alias).log.leases.hold(
                scope, "m2", [0], until_ms=T + 900, now_ms=T + 200
            )
            took.set()
            time.sleep(0.5)
        return held

    thread, outcome = in_thread(db_alias, take_over)
    assert took.wait(10)
    started = time.monotonic()
    assert log.offset_commit(NS, "g", TOPIC, 0, "m1", 1, 9, T + 201) is False
    # The takeover holds its transaction 0.5 s after ``took``: a commit that did not
    # wait for it returns at once (a generous margin for a loaded machine).
    assert time.monotonic() - started > 0.3, "the commit did not wait for the takeover"
    thread.join(10)
    assert outcome == [{0: 2}]
    assert offset_rows(db_alias, "g") == {0: 0}
    assert log.offset_commit(NS, "g", TOPIC, 0, "m2", 2, 6, T + 202) is True
    assert offset_rows(db_alias, "g") == {0: 6}


def test_a_takeover_waits_for_the_holders_commit_in_flight(db_alias: str) -> None:
    """``m1`` commits an offset in a transaction still open: its fence holds the lease
    row, so ``m2``'s takeover of the (now lapsed) lease waits for that transaction and
    gets epoch 2 after the offset is in."""
    if connections[db_alias].vendor == "sqlite":
        pytest.skip("SQLite serialises write transactions: no takeover runs beside a commit")
    log = stores_for(db_alias).log
    scope = (NS, "g", TOPIC)
    log.group_ensure(NS, "g", TOPIC, 1, T)
    assert log.leases.hold(scope, "m1", [0], until_ms=T + 100, now_ms=T) == {0: 1}
    with transaction.atomic(using=db_alias):
        assert log.offset_commit(NS, "g", TOPIC, 0, "m1", 1, 5, T + 99) is True
        thread, outcome = in_thread(
            db_alias,
            lambda: stores_for(db_alias).log.leases.hold(
                scope, "m2", [0], until_ms=T + 900, now_ms=T + 200
            ),
        )
        time.sleep(0.4)
        assert outcome == [], "the takeover did not wait for the commit's transaction"
    thread.join(10)
    assert outcome == [{0: 2}]
    assert offset_rows(db_alias, "g") == {0: 5}
    assert log.offset_commit(NS, "g", TOPIC, 0, "m1", 1, 7, T + 201) is False
    assert offset_rows(db_alias, "g") == {0: 5}


# --- members: a purge beside a live member's heartbeat ---


def test_members_purge_does_not_wait_on_a_live_members_heartbeat_in_flight(
    db_alias: str,
) -> None:
    """A live member's heartbeat holds its row until its transaction ends; another
    member's purge of the silent ones neither waits for it nor removes it."""
    if connections[db_alias].vendor == "sqlite":
        pytest.skip("SQLite serialises write transactions: the purge waits for any writer")
    log = stores_for(db_alias).log
    log.member_beat(NS, "g", TOPIC, "silent", T)
    log.member_beat(NS, "g", TOPIC, "live", T + 500)
    beating, finish = threading.Event(), threading.Event()

    def heartbeat() -> None:
        with transaction.atomic(using=db_alias):
            stores_for(db_alias).log.member_beat(NS, "g", TOPIC, "live", T + 600)
            beating.set()
            finish.wait(10)

    def purge() -> int:
        with connections[db_alias].cursor() as cursor:
            if connections[db_alias].vendor == "mysql":
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            else:
                cursor.execute("SET lock_timeout = '1s'")
        return stores_for(db_alias).log.members_purge(NS, "g", TOPIC, T + 200)

    thread, outcome = in_thread(db_alias, heartbeat)
    try:
        assert beating.wait(10)
        purging, purged = in_thread(db_alias, purge)
        purging.join(10)
        assert purged == [1]
    finally:
        finish.set()
        thread.join(10)
    assert outcome == [None]
    assert member_rows(db_alias, "g") == {"live": T + 600}


# --- records ---


def test_records_keep_every_byte_of_their_keys_and_payloads(db_alias: str) -> None:
    """Keys and payloads are bytes, not text: none is re-encoded on the way in or out
    (a batch of several records, and one alone)."""
    log = stores_for(db_alias).log
    odd = bytes(range(256))
    records = [(0, b"\xff\x00k", odd), (0, None, b"\x80\xfe"), (1, odd, b"")]
    assert log.append(NS, TOPIC, T, records) == [0, 1, 0]
    assert log.append(NS, TOPIC, T + 1, [(1, b"\xc3", b"\xc3\x28")]) == [1]
    assert log.read(NS, TOPIC, 0, 0, 10) == [(0, b"\xff\x00k", odd, T), (1, None, b"\x80\xfe", T)]
    assert log.read(NS, TOPIC, 1, 0, 10) == [(0, odd, b"", T), (1, b"\xc3", b"\xc3\x28", T + 1)]


# --- compact and cleanup ---


def test_compact_removes_superseded_keyed_records_below_every_groups_offset(
    db_alias: str,
) -> None:
    log = stores_for(db_alias).log
    keys = [b"a", b"b", b"c"]
    # Offsets 0..8 of partition 0, key ``keys[offset % 3]``; one keyless record at 9;
    # partition 1 has records of the same keys, which partition 0 never supersedes.
    log.append(NS, TOPIC, T, [(0, keys[n % 3], f"{n}".encode()) for n in range(9)])
    log.append(NS, TOPIC, T, [(0, None, b"keyless"), (1, b"a", b"other")])
    log.group_ensure(NS, "slow", TOPIC, 2, T)
    log.group_ensure(NS, "fast", TOPIC, 2, T)
    for group, offset in (("slow", 5), ("fast", 9)):
        log.leases.hold((NS, group, TOPIC), "m", [0], until_ms=T + 100, now_ms=T)
        assert log.offset_commit(NS, group, TOPIC, 0, "m", 1, offset, T) is True
    # Below 5 (the lowest offset) every keyed record has a newer one of its key.
    assert log.compact(NS, TOPIC, 0) == 5
    assert [r[0] for r in log.read(NS, TOPIC, 0, 0, 100)] == [5, 6, 7, 8, 9]
    assert log.compact(NS, TOPIC, 0) == 0
    assert log.compact(NS, TOPIC, 1) == 0, "partition 1's offset is 0: nothing below it"
    assert log.read(NS, TOPIC, 1, 0, 100) == [(0, b"a", b"other", T)]


def test_compact_without_any_group_keeps_the_newest_record_of_each_key(db_alias: str) -> None:
    log = stores_for(db_alias).log
    log.append(NS, TOPIC, T, [(0, b"k" if n % 2 else b"j", f"{n}".encode()) for n in range(6)])
    assert log.compact(NS, TOPIC, 0) == 4
    assert log.read(NS, TOPIC, 0, 0, 100) == [(4, b"j", b"4", T), (5, b"k", b"5", T)]


@pytest.mark.parametrize("call", ["compact", "cleanup"])
def test_retention_of_a_partition_does_not_wait_for_an_append_in_flight(
    db_alias: str, call: str
) -> None:
    """An appender's transaction is still open on partition 0 (its new records locked);
    compacting or cleaning the records below them neither waits for it (1 s lock
    timeout) nor touches them."""
    if connections[db_alias].vendor == "sqlite":
        pytest.skip("SQLite serialises write transactions: retention waits for any writer")
    if connections[db_alias].vendor == "mysql":
        pytest.skip(
            "InnoDB's DELETE locks the first record past its range, here the append's "
            "new record: retention waits for the append (decision 251; its result is "
            "checked by the test below)"
        )
    log = stores_for(db_alias).log
    log.append(NS, TOPIC, T, [(0, b"k", f"{n}".encode()) for n in range(4)])
    appended, finish = threading.Event(), threading.Event()

    def append_more() -> None:
        with transaction.atomic(using=db_alias):
            stores_for(db_alias).log.append(NS, TOPIC, T + 5, [(0, b"k", b"new")] * 2)
            appended.set()
            finish.wait(10)

    def retain() -> object:
        with connections[db_alias].cursor() as cursor:
            if connections[db_alias].vendor == "mysql":
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            else:
                cursor.execute("SET lock_timeout = '1s'")
        mine = stores_for(db_alias).log
        if call == "compact":
            return mine.compact(NS, TOPIC, 0)
        return mine.cleanup(NS, TOPIC, 0, T + 1, 0)

    appender, appended_outcome = in_thread(db_alias, append_more)
    try:
        assert appended.wait(10)
        retainer, outcome = in_thread(db_alias, retain)
        retainer.join(10)
        # Compaction sees the committed records only: 3 superseded by offset 3.
        assert outcome == [3 if call == "compact" else 4]
    finally:
        finish.set()
        appender.join(10)
    assert appended_outcome == [None]
    assert [r[0] for r in log.read(NS, TOPIC, 0, 0, 100)] == (
        [3, 4, 5] if call == "compact" else [4, 5]
    )


@pytest.mark.parametrize("call", ["compact", "cleanup"])
def test_retention_beside_an_append_in_flight_leaves_the_new_records_alone(
    db_alias: str, call: str
) -> None:
    """Compaction or cleanup of partition 0 while an appender's transaction is open
    there (it commits 0.5 s later): it deletes only committed records below its bounds
    and never the appended ones, which the appender then commits."""
    if connections[db_alias].vendor == "sqlite":
        pytest.skip("SQLite serialises write transactions: no retention runs beside an append")
    log = stores_for(db_alias).log
    log.append(NS, TOPIC, T, [(0, b"k", f"{n}".encode()) for n in range(4)])
    appended = threading.Event()

    def append_more() -> list:
        with transaction.atomic(using=db_alias):
            offsets = stores_for(db_alias).log.append(NS, TOPIC, T + 5, [(0, b"k", b"new")] * 2)
            appended.set()
            time.sleep(0.5)
        return offsets

    def retain() -> object:
        mine = stores_for(db_alias).log
        if call == "compact":
            return mine.compact(NS, TOPIC, 0)
        return mine.cleanup(NS, TOPIC, 0, T + 1, 0)

    appender, appended_outcome = in_thread(db_alias, append_more)
    assert appended.wait(10)
    retainer, outcome = in_thread(db_alias, retain)
    retainer.join(10)
    appender.join(10)
    assert appended_outcome == [[4, 5]]
    assert outcome == [3 if call == "compact" else 4]
    assert [r[0] for r in log.read(NS, TOPIC, 0, 0, 100)] == (
        [3, 4, 5] if call == "compact" else [4, 5]
    )
