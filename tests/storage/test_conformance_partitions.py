"""Conformance of ``PartitionPort`` (``stores_for(alias).partitions``) on SQLite,
PostgreSQL and MariaDB: ``next_rows``, ``fence_and_next`` and ``runnable_head_exists``,
as their docstrings state.

MariaDB runs here through this module's own ``db_alias`` (tests/storage/three_databases.py)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections, transaction

from later_django.core.clock import now_ms
from later_django.core.keys import job_key
from later_django.storage.partitions import Fenced, HeadClaim, PartitionEntry
from later_django.storage.stores import driver_for, stores_for
from later_django.storage.types import RangeAdd, RangeRemove
from tests.storage import three_databases
from tests.threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

NS = "ns"
OTHER_NS = "ns-other"
TOPIC = "orders"


def entry(partition: int, sequence: int, job_id: str, run_at: int, stage: str = "enqueued"):
    return PartitionEntry(TOPIC, partition, sequence, job_id, run_at, stage)


def write_index_rows(db_alias: str, namespace: str, stages: dict[str, str]) -> None:
    """Index rows of the jobs ``stages`` (job id -> stage), written as rows: the index
    store's own statements are not what these tests are about (nor, on MariaDB, there
    yet)."""
    now = now_ms()
    with connections[db_alias].cursor() as cursor:
        for job_id, stage in stages.items():
            cursor.execute(
                "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage, "
                "stage_date_ms, revision, created_at_ms) VALUES (%s, %s, 't', %s, %s, 1, %s)",
                [namespace, job_id, stage, now, now],
            )


def table(db_alias: str, sql: str) -> list[tuple]:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]


def snapshot(db_alias: str) -> dict[str, list[tuple]]:
    return {
        "jobs": table(
            db_alias,
            "SELECT namespace, topic, partition_id, sequence, job_id, earliest_run_at "
            "FROM later_partition_job ORDER BY namespace, topic, partition_id, sequence",
        ),
        "heads": table(
            db_alias,
            "SELECT namespace, topic, partition_id, sequence, job_id, earliest_run_at, stage "
            "FROM later_partition_head ORDER BY namespace, topic, partition_id",
        ),
    }


def lease_state(db_alias: str) -> dict:
    leases = stores_for(db_alias).partitions.leases.leases((NS,))
    return {slot: (lease.owner, lease.until_ms, lease.epoch) for slot, lease in leases.items()}


@pytest.fixture
def filled(db_alias: str) -> int:
    """Partition 0: A(1) B(2) C(3); partition 1: D(1); partition 2: E(1), all in ``NS``;
    B's index row says ``requeued``, B and D have records. Returns the base run time."""
    stores = stores_for(db_alias)
    base = now_ms() - 60_000
    stores.partitions.enter(
        NS,
        [
            entry(0, 1, "A", base + 1),
            entry(0, 2, "B", base + 2),
            entry(0, 3, "C", base + 3),
            entry(1, 1, "D", base + 11),
            entry(2, 1, "E", base + 21),
        ],
    )
    stores.partitions.enter(OTHER_NS, [entry(1, 7, "elsewhere", base)])
    write_index_rows(db_alias, NS, {"B": "requeued", "D": "delayed"})
    stores.kv.set(job_key(NS, "B"), b"record-of-B")
    stores.kv.set(job_key(NS, "D"), b"record-of-D")
    return base


# --- next_rows ---


def test_next_rows_are_each_partitions_lowest_row_but_the_exits(db_alias: str, filled: int) -> None:
    store = stores_for(db_alias).partitions
    before = snapshot(db_alias)
    following = store.next_rows(
        NS, [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2), (TOPIC, 9)], ["A", "E"], now_ms()
    )
    assert sorted(following, key=lambda pair: pair[0].partition_id) == [
        (HeadClaim(TOPIC, 0, 2, "B", "requeued", 0, b"record-of-B"), filled + 2),
        (HeadClaim(TOPIC, 1, 1, "D", "delayed", 0, b"record-of-D"), filled + 11),
    ]
    assert snapshot(db_alias) == before, "next_rows only reads"


def test_next_rows_without_exits_are_the_current_lowest_rows(db_alias: str, filled: int) -> None:
    store = stores_for(db_alias).partitions
    following = store.next_rows(NS, [(TOPIC, 0), (TOPIC, 2)], [], now_ms())
    assert sorted((claim.partition, claim.job_id, at) for claim, at in following) == [
        ((TOPIC, 0), "A", filled + 1),
        ((TOPIC, 2), "E", filled + 21),
    ]
    # A job without a record comes with none.
    assert {claim.record for claim, _ in following} == {None}
    assert store.next_rows(NS, [], ["A"], now_ms()) == []


def test_next_rows_skip_every_exit_of_a_partition(db_alias: str, filled: int) -> None:
    store = stores_for(db_alias).partitions
    following = store.next_rows(NS, [(TOPIC, 0)], ["A", "B"], now_ms())
    assert [(claim.job_id, claim.sequence, at) for claim, at in following] == [("C", 3, filled + 3)]
    assert store.next_rows(NS, [(TOPIC, 0)], ["A", "B", "C"], now_ms()) == []


# --- fence_and_next ---


def test_fence_and_next_keeps_only_partitions_held_at_their_epoch(
    db_alias: str, filled: int
) -> None:
    store = stores_for(db_alias).partitions
    now = now_ms()
    # me: partitions 0 and 2 at epoch 1; partition 1 went to "other" at epoch 2.
    assert store.take(NS, "me", [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)], now + 30_000, now) == {
        (TOPIC, 0): 1,
        (TOPIC, 1): 1,
        (TOPIC, 2): 1,
    }
    store.release(NS, "me", [(TOPIC, 1)])
    assert store.take(NS, "other", [(TOPIC, 1)], now + 30_000, now) == {(TOPIC, 1): 2}
    held = [(TOPIC, 0, 1), (TOPIC, 1, 1), (TOPIC, 2, 1), (TOPIC, 3, 1)]
    fenced = store.fence_and_next(NS, "me", held, now + 90_000, ["A", "E"], now)
    kept, following = fenced.kept, fenced.following
    assert kept == {(TOPIC, 0), (TOPIC, 2)}
    # Partition 2 is fenced but has no row left once E exits.
    assert following == [(HeadClaim(TOPIC, 0, 2, "B", "requeued", 0, b"record-of-B"), filled + 2)]
    assert lease_state(db_alias) == {
        (TOPIC, 0): ("me", now + 90_000, 1),
        (TOPIC, 1): ("other", now + 30_000, 2),
        (TOPIC, 2): ("me", now + 90_000, 1),
    }


def test_fence_and_next_with_a_stale_epoch_fences_nothing_and_changes_nothing(
    db_alias: str, filled: int
) -> None:
    store = stores_for(db_alias).partitions
    now = now_ms()
    assert store.take(NS, "me", [(TOPIC, 0)], now + 30_000, now) == {(TOPIC, 0): 1}
    before = lease_state(db_alias)
    rows_before = snapshot(db_alias)
    nothing = Fenced(set(), [], {})
    assert store.fence_and_next(NS, "me", [(TOPIC, 0, 2)], now + 90_000, [], now) == nothing
    assert store.fence_and_next(NS, "intruder", [(TOPIC, 0, 1)], now + 90_000, [], now) == nothing
    assert store.fence_and_next(NS, "me", [], now + 90_000, [], now) == nothing
    assert lease_state(db_alias) == before
    assert snapshot(db_alias) == rows_before


def test_fence_and_next_agrees_with_fence_then_next_rows(db_alias: str, filled: int) -> None:
    store = stores_for(db_alias).partitions
    now = now_ms()
    store.take(NS, "me", [(TOPIC, 0), (TOPIC, 1)], now + 30_000, now)
    held = [(TOPIC, 0, 1), (TOPIC, 1, 1)]
    fenced = store.fence_and_next(NS, "me", held, now + 40_000, ["A"], now)
    kept, following = fenced.kept, fenced.following
    assert kept == store.fence(NS, "me", held, now + 40_000)
    expected = store.next_rows(NS, sorted(kept), ["A"], now)

    def key(pair: tuple[HeadClaim, int]) -> tuple[str, int]:
        return pair[0].partition

    assert sorted(following, key=key) == sorted(expected, key=key)
    assert [claim.job_id for claim, _ in sorted(following, key=key)] == ["B", "D"]


def test_fence_and_next_reads_the_live_members_of_the_ranges_asked_for(
    db_alias: str, filled: int
) -> None:
    """What ``range_members_many`` reads (live members, oldest first, ranges with none
    left out), whether or not a partition is still held."""
    stores = stores_for(db_alias)
    stores.kv.apply(
        [
            RangeAdd("r1", b"z"),
            RangeAdd("r1", b"a"),
            RangeAdd("r2", b"dead", ttl_seconds=-1),
            RangeAdd("r3", b"removed"),
            RangeAdd("other", b"not-asked"),
        ]
    )
    stores.kv.apply([RangeRemove("r3", b"removed")])
    now = now_ms()
    stores.partitions.take(NS, "me", [(TOPIC, 0)], now + 30_000, now)
    ranges = ["r1", "r2", "r3", "absent"]
    fenced = stores.partitions.fence_and_next(
        NS, "me", [(TOPIC, 0, 1)], now + 40_000, ["A"], now, ranges=ranges
    )
    assert fenced.kept == {(TOPIC, 0)}
    assert [claim.job_id for claim, _ in fenced.following] == ["B"]
    assert fenced.members == {"r1": [b"z", b"a"]}
    assert stores.kv.range_members_many(ranges) == fenced.members
    lost = stores.partitions.fence_and_next(NS, "me", [(TOPIC, 0, 9)], now, [], now, ranges=ranges)
    assert lost == Fenced(set(), [], {"r1": [b"z", b"a"]})
    alone = stores.partitions.fence_and_next(NS, "me", [], now, [], now, ranges=["r1"])
    assert alone == Fenced(set(), [], {"r1": [b"z", b"a"]})


# --- runnable_head_exists ---


def test_runnable_head_exists_is_false_without_heads(db_alias: str) -> None:
    assert stores_for(db_alias).partitions.runnable_head_exists(NS, now_ms()) is False


@pytest.mark.parametrize(
    ("stage", "run_in_ms", "runnable"),
    [
        ("enqueued", 0, True),
        ("enqueued", 60_000, True),  # an enqueued head is runnable whatever its run time
        ("delayed", -1, True),
        ("delayed", 60_000, False),
        ("requeued", 0, True),
        ("requeued", 60_000, False),
        ("waiting", -60_000, False),
    ],
)
def test_runnable_head_exists_follows_the_heads_stage_and_run_time(
    db_alias: str, stage: str, run_in_ms: int, runnable: bool
) -> None:
    store = stores_for(db_alias).partitions
    now = now_ms()
    store.enter(NS, [entry(0, 1, "J", now + run_in_ms, stage)])
    assert store.runnable_head_exists(NS, now) is runnable
    assert store.runnable_head_exists(OTHER_NS, now) is False


def test_runnable_head_exists_whoever_holds_the_partition(db_alias: str) -> None:
    store = stores_for(db_alias).partitions
    now = now_ms()
    store.enter(NS, [entry(0, 1, "J", now - 1), entry(1, 1, "W", now, "waiting")])
    assert store.runnable_head_exists(NS, now) is True, "no lease at all"
    store.take(NS, "someone", [(TOPIC, 0)], now + 30_000, now)
    assert store.runnable_head_exists(NS, now) is True, "held by another worker"
    store.advance(NS, [(TOPIC, 0)], exits=["J"])
    assert store.runnable_head_exists(NS, now) is False, "only the waiting head is left"


def test_runnable_head_exists_turns_true_when_a_delayed_head_becomes_due(db_alias: str) -> None:
    store = stores_for(db_alias).partitions
    now = now_ms()
    store.enter(NS, [entry(0, 1, "J", now + 10_000, "delayed")])
    assert store.runnable_head_exists(NS, now) is False
    assert store.runnable_head_exists(NS, now + 9_999) is False
    assert store.runnable_head_exists(NS, now + 10_000) is True


# --- concurrency: allocation and the fence ---


def register(db_alias: str, namespace: str, topic: str, partitions: int) -> None:
    """``later_topic``'s row of ``topic``, written as a row (the topic store's own
    statements are not what these tests are about)."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "INSERT INTO later_topic (namespace, topic, partitions, created_at) "
            "VALUES (%s, %s, %s, 0)",
            [namespace, topic, partitions],
        )


def test_concurrent_allocations_of_a_partition_get_disjoint_consecutive_ranges(
    db_alias: str,
) -> None:
    """A second allocator of the same partitions, whose transaction starts while the
    first's is open, waits for it and then allocates after the first's range, for a
    partition that had no sequence row yet (0) as for one that had (1)."""
    store = stores_for(db_alias).partitions
    register(db_alias, NS, TOPIC, 4)
    assert store.allocate(NS, [(TOPIC, 1, 5, 4)]) == {(TOPIC, 1): 1}
    first_open = threading.Event()
    # Set as the first's transaction commits: an allocator that did not wait is done
    # half a second before.
    first_committing = threading.Event()

    def first() -> dict:
        with transaction.atomic(using=db_alias):
            allocated = stores_for(db_alias).partitions.allocate(
                NS, [(TOPIC, 0, 3, 4), (TOPIC, 1, 3, 4)]
            )
            first_open.set()
            time.sleep(0.5)
            first_committing.set()
        return allocated

    def second() -> tuple[dict, bool]:
        assert first_open.wait(10)
        with transaction.atomic(using=db_alias):
            allocated = stores_for(db_alias).partitions.allocate(
                NS, [(TOPIC, 0, 2, 4), (TOPIC, 1, 2, 4)]
            )
            return allocated, first_committing.is_set()

    threads = [in_thread(db_alias, first), in_thread(db_alias, second)]
    for thread, _ in threads:
        thread.join(30)
    (_, first_outcome), (_, second_outcome) = threads
    assert first_outcome == [{(TOPIC, 0): 1, (TOPIC, 1): 6}]
    # The second waited for the first's commit, then took the sequences after its own.
    assert second_outcome == [({(TOPIC, 0): 4, (TOPIC, 1): 9}, True)]
    assert table(
        db_alias,
        "SELECT partition_id, next_sequence FROM later_partition_sequence ORDER BY partition_id",
    ) == [(0, 6), (1, 11)]


def test_a_fenced_out_holder_is_refused_and_its_fence_holds_off_a_takeover(
    db_alias: str,
) -> None:
    """While a holder's fencing transaction is open, a taker that finds the lease
    lapsed waits, then sees the renewal and gets nothing; once the renewed lease
    lapses it takes the partition at the next epoch, and the old holder's fence at
    its old epoch keeps nothing and changes nothing."""
    store = stores_for(db_alias).partitions
    now = now_ms()
    assert store.take(NS, "old", [(TOPIC, 0)], now + 1_000, now) == {(TOPIC, 0): 1}
    fenced = threading.Event()
    later = now + 5_000  # the old holder's first lease has lapsed by then

    def holder() -> set:
        with transaction.atomic(using=db_alias):
            kept = stores_for(db_alias).partitions.fence(NS, "old", [(TOPIC, 0, 1)], later + 10_000)
            fenced.set()
            time.sleep(0.5)
        return kept

    def taker() -> dict:
        assert fenced.wait(10)
        return stores_for(db_alias).partitions.take(NS, "new", [(TOPIC, 0)], later + 30_000, later)

    threads = [in_thread(db_alias, holder), in_thread(db_alias, taker)]
    for thread, _ in threads:
        thread.join(30)
    (_, kept), (_, taken) = threads
    assert kept == [{(TOPIC, 0)}]
    assert taken == [{}], "the taker saw the renewal it waited for"
    assert lease_state(db_alias) == {(TOPIC, 0): ("old", later + 10_000, 1)}
    # The renewed lease lapses: the partition changes hands at epoch 2.
    lapsed = later + 20_000
    assert store.take(NS, "new", [(TOPIC, 0)], lapsed + 30_000, lapsed) == {(TOPIC, 0): 2}
    before = snapshot(db_alias)
    assert store.fence(NS, "old", [(TOPIC, 0, 1)], lapsed + 60_000) == set()
    assert store.fence_and_next(NS, "old", [(TOPIC, 0, 1)], lapsed + 60_000, [], lapsed) == (
        Fenced(set(), [], {})
    )
    assert lease_state(db_alias) == {(TOPIC, 0): ("new", lapsed + 30_000, 2)}
    assert snapshot(db_alias) == before


def test_a_finish_racing_an_enqueue_leaves_no_head_naming_a_gone_row(db_alias: str) -> None:
    """A finish advancing a partition while an enqueue's new row in it is not yet
    committed never leaves the head naming the row it deleted: the head is the new row,
    or there is none (the race :meth:`materialize_heads` repairs, as it then does).
    Where writers do not serialise (all but SQLite) the finish does not wait for the
    enqueue: it locks nothing the enqueue holds (MariaDB did, when a small namespace
    let the server read the rows to delete by the namespace alone)."""
    store = stores_for(db_alias).partitions
    store.enter(NS, [entry(0, 1, "A", 1)])
    entered = threading.Event()
    # Set as the enqueue commits: a finish that did not wait is done half a second before.
    committing = threading.Event()

    def enqueue() -> None:
        with transaction.atomic(using=db_alias):
            stores_for(db_alias).partitions.enter(NS, [entry(0, 2, "B", 2)])
            entered.set()
            time.sleep(0.5)
            committing.set()

    def finish() -> bool:
        assert entered.wait(10)
        with transaction.atomic(using=db_alias):
            stores_for(db_alias).partitions.advance(NS, [(TOPIC, 0)], exits=["A"])
        return committing.is_set()

    threads = [in_thread(db_alias, enqueue), in_thread(db_alias, finish)]
    for thread, _ in threads:
        thread.join(30)
    waited = driver_for(db_alias).serializes_writes
    assert [outcome for _, outcome in threads] == [[None], [waited]]
    rows = snapshot(db_alias)
    assert [row[4] for row in rows["jobs"]] == ["B"]
    assert [row[4] for row in rows["heads"]] in (["B"], []), rows["heads"]
    store.materialize_heads(NS, [(TOPIC, 0)])
    assert [row[4] for row in snapshot(db_alias)["heads"]] == ["B"]
