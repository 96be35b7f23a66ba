"""Conformance of ``PartitionPort`` (``stores_for(alias).partitions``) on SQLite and
PostgreSQL: ``next_rows``, ``fence_and_next`` and ``runnable_head_exists``, as their
docstrings state."""

from __future__ import annotations

import pytest
from django.db import connections

from later_django.core.clock import now_ms
from later_django.core.keys import job_key
from later_django.storage.partitions import Fenced, HeadClaim, PartitionEntry
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexRow, RangeAdd, RangeRemove

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

NS = "ns"
OTHER_NS = "ns-other"
TOPIC = "orders"


def entry(partition: int, sequence: int, job_id: str, run_at: int, stage: str = "enqueued"):
    return PartitionEntry(TOPIC, partition, sequence, job_id, run_at, stage)


def index_row(job_id: str, stage: str) -> JobIndexRow:
    now = now_ms()
    return JobIndexRow(
        job_id=job_id,
        payload_type="t",
        stage=stage,
        stage_date_ms=now,
        revision=1,
        created_at_ms=now,
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
    stores.index.job_index_upsert(NS, [index_row("B", "requeued"), index_row("D", "delayed")])
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
