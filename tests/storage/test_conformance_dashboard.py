"""Conformance of ``DashboardPort`` (``stores_for(alias).dashboard``) on SQLite,
PostgreSQL and MariaDB: counters, queue heads, metric windows and the partition tables, as the
port's docstrings state."""

from __future__ import annotations

import pytest
from django.db import connections

from later_django.core.clock import MINUTE_MS, minute_bucket, now_ms
from later_django.engine.topics import register_topic
from later_django.storage.dashboard import PartitionHeadRow, PartitionLeaseRow
from later_django.storage.partitions import PartitionEntry
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexMetricsBatch, JobIndexRow, JobIndexWaitStats
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

NS = "ns"
OTHER_NS = "ns-other"
QUEUE = "jobs"


def index_row(job_id: str, stage: str, revision: int = 0) -> JobIndexRow:
    now = now_ms()
    return JobIndexRow(
        job_id=job_id,
        payload_type="t",
        stage=stage,
        stage_date_ms=now,
        revision=revision,
        created_at_ms=now,
    )


def run_sql(db_alias: str, sql: str, params: list) -> None:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(sql, params)


# --- stage_totals ---


def test_stage_totals_sum_the_counters_per_stage_finished_stages_included(
    db_alias: str,
) -> None:
    stores = stores_for(db_alias)
    assert stores.dashboard.stage_totals(NS) == {}
    stores.index.job_index_upsert(
        NS,
        [
            index_row("e1", "enqueued"),
            index_row("e2", "enqueued"),
            index_row("r1", "running"),
            index_row("s1", "success"),
            index_row("s2", "success"),
            index_row("f1", "failed"),
        ],
    )
    stores.index.job_index_upsert(OTHER_NS, [index_row("x", "running")])
    assert stores.dashboard.stage_totals(NS) == {
        "enqueued": 2,
        "running": 1,
        "success": 2,
        "failed": 1,
    }
    stores.index.job_index_upsert(NS, [index_row("e1", "running", revision=1)])
    assert stores.dashboard.stage_totals(NS) == {
        "enqueued": 1,
        "running": 2,
        "success": 2,
        "failed": 1,
    }
    assert stores.dashboard.stage_totals(OTHER_NS) == {"running": 1}


def test_stage_totals_add_every_shard_and_report_a_sum_below_zero(db_alias: str) -> None:
    stores = stores_for(db_alias)
    stores.index.job_index_upsert(NS, [index_row("e1", "enqueued")])
    insert = (
        "INSERT INTO later_stage_counts (namespace, stage, shard, count) VALUES (%s, %s, %s, %s)"
    )
    run_sql(db_alias, insert, [NS, "enqueued", 98, 4])
    run_sql(db_alias, insert, [NS, "delayed", 98, -3])
    assert stores.dashboard.stage_totals(NS) == {"enqueued": 5, "delayed": -3}


# --- queue_depths ---


def test_queue_depths_are_ready_messages_per_queue_by_name(db_alias: str) -> None:
    stores = stores_for(db_alias)
    assert stores.dashboard.queue_depths(NS) == []
    # Names whose order is the same in byte order and in a linguistic collation.
    stores.queue.publish(NS, "zeta", [b"1", b"2", b"3"])
    stores.queue.publish(NS, "Alpha", [b"1"])
    stores.queue.publish(NS, "__later_internal", [b"1", b"2"])
    stores.queue.publish(OTHER_NS, "zeta", [b"elsewhere"])
    assert len(stores.queue.claim(NS, ["zeta"], "w", 60_000, batch_size=1)) == 1
    assert stores.dashboard.queue_depths(NS) == [
        ("Alpha", 1),
        ("__later_internal", 2),
        ("zeta", 2),
    ]
    assert stores.dashboard.queue_depths(OTHER_NS) == [("zeta", 1)]


# --- oldest_ready_at_ms ---


def test_oldest_ready_at_ms_is_the_first_ready_message_in_queue_order(db_alias: str) -> None:
    stores = stores_for(db_alias)
    now = now_ms()
    assert stores.dashboard.oldest_ready_at_ms(NS, QUEUE, now) is None
    stores.queue.publish(NS, QUEUE, [b"future"], available_at_ms=now + 600_000)
    assert stores.dashboard.oldest_ready_at_ms(NS, QUEUE, now) is None, "not available yet"
    stores.queue.publish(NS, QUEUE, [b"claimed"], available_at_ms=now - 5_000)
    stores.queue.publish(NS, QUEUE, [b"second"], available_at_ms=now - 3_000)
    stores.queue.publish(NS, QUEUE, [b"third"], available_at_ms=now - 4_000)
    stores.queue.publish(NS, "other-queue", [b"x"], available_at_ms=now - 9_000)
    (claimed,) = stores.queue.claim(NS, [QUEUE], "w", 60_000, batch_size=1)
    assert claimed.payload == b"claimed"
    dashboard = stores.dashboard
    # The claimed message is not ready; the next in queue order is "second".
    assert dashboard.oldest_ready_at_ms(NS, QUEUE, now) == now - 3_000
    # Once the claim's lease has lapsed, the claimed message is ready again.
    assert dashboard.oldest_ready_at_ms(NS, QUEUE, claimed.lease_until_ms + 1) == now - 5_000
    assert dashboard.oldest_ready_at_ms(NS, "other-queue", now) == now - 9_000
    assert dashboard.oldest_ready_at_ms(OTHER_NS, QUEUE, now) is None


# --- transitions_between, waits_between ---


@pytest.fixture
def metrics(db_alias: str) -> int:
    """Metric samples in four consecutive minute buckets; returns the first bucket."""
    first = minute_bucket(now_ms()) - 5
    at = [(first + n) * MINUTE_MS for n in range(4)]
    batch = JobIndexMetricsBatch(
        transitions=[
            ("success", at[0], 2),
            ("success", at[1] + 59_999, 3),
            ("failed", at[2], 1),
            ("success", at[3], 7),
        ],
        waits=[
            ("queue", at[0], 2, 100, 80),
            ("queue", at[1] + 1, 3, 400, 300),
            ("start", at[2], 1, 55, 55),
            ("queue", at[3], 10, 10_000, 9_000),
        ],
    )
    stores_for(db_alias).metrics.record_batch(NS, batch)
    stores_for(db_alias).metrics.record_batch(
        OTHER_NS, JobIndexMetricsBatch(transitions=[("success", at[0], 100)])
    )
    return first


def test_transitions_between_sum_per_stage_over_the_buckets(db_alias: str, metrics: int) -> None:
    dashboard = stores_for(db_alias).dashboard
    b = metrics
    assert dashboard.transitions_between(NS, b, b + 2) == {"success": 5, "failed": 1}
    assert dashboard.transitions_between(NS, b + 1, b + 1) == {"success": 3}
    assert dashboard.transitions_between(NS, b + 3, b + 3) == {"success": 7}
    assert dashboard.transitions_between(NS, b, b + 3) == {"success": 12, "failed": 1}
    assert dashboard.transitions_between(NS, b + 4, b + 10) == {}
    assert dashboard.transitions_between(OTHER_NS, b, b + 3) == {"success": 100}


def test_waits_between_give_count_average_and_max_per_mode(db_alias: str, metrics: int) -> None:
    dashboard = stores_for(db_alias).dashboard
    b = metrics
    assert dashboard.waits_between(NS, b, b + 1) == {
        "queue": JobIndexWaitStats(count=5, avg_ms=100, max_ms=300)
    }
    assert dashboard.waits_between(NS, b, b + 2) == {
        "queue": JobIndexWaitStats(count=5, avg_ms=100, max_ms=300),
        "start": JobIndexWaitStats(count=1, avg_ms=55, max_ms=55),
    }
    # Integer average: (100 + 400 + 10000) // 15.
    assert dashboard.waits_between(NS, b, b + 3)["queue"] == JobIndexWaitStats(
        count=15, avg_ms=700, max_ms=9_000
    )
    assert dashboard.waits_between(NS, b + 4, b + 10) == {}
    assert dashboard.waits_between(OTHER_NS, b, b + 3) == {}


def test_transitions_per_slot_fold_one_stage_into_slots_with_the_busiest_minute(
    db_alias: str, metrics: int
) -> None:
    dashboard = stores_for(db_alias).dashboard
    b = metrics
    success = {b: 2, b + 1: 3, b + 3: 7}  # the fixture's "success" minute buckets

    def folded(size: int) -> list[tuple[int, int, int]]:
        slots: dict[int, list[int]] = {}
        for bucket, count in success.items():
            slots.setdefault(bucket // size, []).append(count)
        return [(slot, sum(counts), max(counts)) for slot, counts in sorted(slots.items())]

    assert dashboard.transitions_per_slot(NS, "success", b, b + 3, 1) == [
        (b, 2, 2),
        (b + 1, 3, 3),
        (b + 3, 7, 7),
    ]
    for size in (2, 3, 10, 60):
        assert dashboard.transitions_per_slot(NS, "success", b, b + 3, size) == folded(size)
    assert dashboard.transitions_per_slot(NS, "success", b + 1, b + 2, 1) == [(b + 1, 3, 3)]
    assert dashboard.transitions_per_slot(NS, "failed", b, b + 3, 10) == [((b + 2) // 10, 1, 1)]
    assert dashboard.transitions_per_slot(NS, "running", b, b + 3, 1) == []
    assert dashboard.transitions_per_slot(OTHER_NS, "success", b, b + 3, 1) == [(b, 100, 100)]
    with pytest.raises(ValueError, match="at least 1"):
        dashboard.transitions_per_slot(NS, "success", b, b + 3, 0)


# --- partition tables ---


def test_partition_heads_in_topic_and_partition_order_up_to_the_limit(db_alias: str) -> None:
    stores = stores_for(db_alias)
    assert stores.dashboard.partition_heads(NS, 10) == {}
    stores.partitions.enter(
        NS,
        [
            PartitionEntry("b", 0, 1, "B0", 5_000, "delayed"),
            PartitionEntry("a", 2, 4, "A2", 3_000, "enqueued"),
            PartitionEntry("a", 2, 5, "A2-next", 3_001, "enqueued"),
            PartitionEntry("a", 10, 1, "A10", 2_000, "enqueued"),
            PartitionEntry("a", 0, 7, "A0", 1_000, "waiting"),
        ],
    )
    stores.partitions.enter(OTHER_NS, [PartitionEntry("a", 1, 1, "X", 1, "enqueued")])
    heads = stores.dashboard.partition_heads(NS, 10)
    assert heads == {
        ("a", 0): PartitionHeadRow(7, "A0", 1_000, "waiting"),
        ("a", 2): PartitionHeadRow(4, "A2", 3_000, "enqueued"),
        ("a", 10): PartitionHeadRow(1, "A10", 2_000, "enqueued"),
        ("b", 0): PartitionHeadRow(1, "B0", 5_000, "delayed"),
    }
    assert list(heads) == [("a", 0), ("a", 2), ("a", 10), ("b", 0)]
    assert list(stores.dashboard.partition_heads(NS, 2)) == [("a", 0), ("a", 2)]


def test_partition_leases_in_topic_and_partition_order_up_to_the_limit(db_alias: str) -> None:
    stores = stores_for(db_alias)
    partitions = stores.partitions
    now = now_ms()
    assert stores.dashboard.partition_leases(NS, 10) == {}
    assert partitions.take(NS, "me", [("a", 0), ("a", 3)], now + 30_000, now) == {
        ("a", 0): 1,
        ("a", 3): 1,
    }
    partitions.release(NS, "me", [("a", 3)])
    assert partitions.take(NS, "other", [("b", 1)], now + 40_000, now) == {("b", 1): 1}
    partitions.take(OTHER_NS, "me", [("a", 1)], now + 30_000, now)
    leases = stores.dashboard.partition_leases(NS, 10)
    assert leases == {
        ("a", 0): PartitionLeaseRow("me", now + 30_000, 1),
        ("a", 3): PartitionLeaseRow(None, 0, 1),
        ("b", 1): PartitionLeaseRow("other", now + 40_000, 1),
    }
    assert list(leases) == [("a", 0), ("a", 3), ("b", 1)]
    assert stores.dashboard.partition_leases(NS, 1) == {
        ("a", 0): PartitionLeaseRow("me", now + 30_000, 1)
    }


def test_partition_next_sequences_up_to_the_limit(db_alias: str) -> None:
    stores = stores_for(db_alias)
    assert stores.dashboard.partition_next_sequences(NS, 10) == {}
    register_topic(stores, NS, "a", 4)
    register_topic(stores, NS, "b", 2)
    register_topic(stores, OTHER_NS, "a", 4)
    assert stores.partitions.allocate(NS, [("a", 0, 3, 4), ("a", 2, 1, 4), ("b", 1, 5, 2)]) == {
        ("a", 0): 1,
        ("a", 2): 1,
        ("b", 1): 1,
    }
    stores.partitions.allocate(NS, [("a", 0, 2, 4)])
    stores.partitions.allocate(OTHER_NS, [("a", 3, 9, 4)])
    assert stores.dashboard.partition_next_sequences(NS, 10) == {
        ("a", 0): 6,
        ("a", 2): 2,
        ("b", 1): 6,
    }
    assert stores.dashboard.partition_next_sequences(NS, 2) == {("a", 0): 6, ("a", 2): 2}
    assert stores.dashboard.partition_next_sequences(OTHER_NS, 10) == {("a", 3): 10}


# --- unclaimed_messages_published_between ---


def test_unclaimed_messages_published_between_one_queue_and_priority(db_alias: str) -> None:
    stores = stores_for(db_alias)
    base = now_ms() - 60_000
    sequences = [
        stores.queue.publish(NS, QUEUE, [f"p{n}".encode()], available_at_ms=base + n * 1_000)[0]
        for n in range(5)
    ]
    (claimed,) = stores.queue.claim(NS, [QUEUE], "w", 60_000, batch_size=1)
    assert claimed.sequence == sequences[0]
    stores.queue.publish(NS, QUEUE, [b"high"], priority=5, available_at_ms=base + 2_000)
    stores.queue.publish(NS, "other-queue", [b"other"], available_at_ms=base + 2_000)
    stores.queue.publish(OTHER_NS, QUEUE, [b"elsewhere"], available_at_ms=base + 2_000)
    between = stores.dashboard.unclaimed_messages_published_between
    assert between(NS, QUEUE, 0, base, base + 3_000, 10) == [
        (sequences[1], b"p1"),
        (sequences[2], b"p2"),
        (sequences[3], b"p3"),
    ]
    assert between(NS, QUEUE, 0, base + 1_000, base + 3_000, 2) == [
        (sequences[1], b"p1"),
        (sequences[2], b"p2"),
    ]
    assert between(NS, QUEUE, 0, base + 3_000, base + 3_000, 10) == [(sequences[3], b"p3")]
    assert [payload for _, payload in between(NS, QUEUE, 5, base, base + 9_000, 10)] == [b"high"]
    assert between(NS, QUEUE, 0, base + 4_001, base + 9_000, 10) == []
    assert [payload for _, payload in between(NS, "other-queue", 0, base, base + 9_000, 10)] == [
        b"other"
    ]


# --- log_partition_ends, consumer_offsets (the metrics view's consumer lag) ---


def test_log_partition_ends_and_consumer_offsets_read_every_topic_of_the_namespace(
    db_alias: str,
) -> None:
    stores = stores_for(db_alias)
    log = stores.log
    log.append("ns", "events", 1_000, [(0, None, b"a"), (0, None, b"b"), (1, None, b"c")])
    log.append("ns", "audit", 1_000, [(0, None, b"d")])
    log.append("other", "events", 1_000, [(0, None, b"e")])
    log.group_ensure("ns", "mailer", "events", 2, 1_000)
    run_sql(
        db_alias,
        "UPDATE later_log_consumer_offset SET next_offset = 1"
        " WHERE namespace = %s AND group_name = %s AND partition_id = 0",
        ["ns", "mailer"],
    )
    reads = stores.dashboard
    assert reads.log_partition_ends("ns", 100) == {
        ("audit", 0): 1,
        ("events", 0): 2,
        ("events", 1): 1,
    }
    assert reads.log_partition_ends("ns", 1) == {("audit", 0): 1}
    assert reads.consumer_offsets("ns", 100) == {
        ("mailer", "events", 0): 1,
        ("mailer", "events", 1): 0,
    }
    assert reads.consumer_offsets("other", 100) == {}
