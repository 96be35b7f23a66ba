"""Statements of the dashboard's reads: counters, metric buckets, queue heads,
partition tables, and the bounded search of a queued job's delivery message.

Every read is O(1) or bounded (a small table, a ``LIMIT``, or a walk that
stops at its first match); none counts or scans ``later_jobs_index`` or
``later_delivery_queue``.
"""

from __future__ import annotations


def oldest_ready(table: str) -> str:
    """The first ready message of a queue in queue order; ``table`` is the queue's
    table as the vendor names it for this walk (with its index hint)."""
    return (
        f"SELECT available_at FROM {table}"
        " WHERE namespace = %(namespace)s AND queue_name = %(queue_name)s"
        " AND available_at <= %(now)s AND (lease_until IS NULL OR lease_until <= %(now)s)"
        " ORDER BY sequence LIMIT 1"
    )


class DashboardQueries:
    """The dashboard's read statements."""

    # Every stage, finished ones included (migration 0005): one row per stage.
    stage_counts = (
        "SELECT stage, SUM(count) FROM later_stage_counts"
        " WHERE namespace = %(namespace)s GROUP BY stage"
    )
    queue_depths = (
        "SELECT queue_name, SUM(ready) FROM later_queue_depth"
        " WHERE namespace = %(namespace)s GROUP BY queue_name ORDER BY queue_name"
    )
    recent_transitions = (
        "SELECT stage, SUM(count) FROM later_job_transition_metrics"
        " WHERE namespace = %(namespace)s"
        " AND minute_bucket >= %(first_bucket)s AND minute_bucket <= %(last_bucket)s"
        " GROUP BY stage"
    )
    # One stage's buckets folded into slots of ``slot_minutes`` (a range of the primary
    # key namespace, stage, minute_bucket): per slot the moves and the busiest minute.
    transitions_per_slot = (
        "SELECT minute_bucket / CAST(%(slot_minutes)s AS INTEGER) AS slot, SUM(count), MAX(count)"
        " FROM later_job_transition_metrics"
        " WHERE namespace = %(namespace)s AND stage = %(stage)s"
        " AND minute_bucket >= %(first_bucket)s AND minute_bucket <= %(last_bucket)s"
        " GROUP BY slot ORDER BY slot"
    )
    recent_waits = (
        "SELECT mode, SUM(count), SUM(sum_ms), MAX(max_ms) FROM later_job_wait_metrics"
        " WHERE namespace = %(namespace)s"
        " AND minute_bucket >= %(first_bucket)s AND minute_bucket <= %(last_bucket)s"
        " GROUP BY mode"
    )
    topics = (
        "SELECT topic, partitions FROM later_topic WHERE namespace = %(namespace)s ORDER BY topic"
    )
    partition_heads = (
        "SELECT topic, partition_id, sequence, job_id, earliest_run_at, stage"
        " FROM later_partition_head WHERE namespace = %(namespace)s"
        " ORDER BY topic, partition_id LIMIT %(limit)s"
    )
    partition_leases = (
        "SELECT topic, partition_id, owner, lease_until, epoch"
        " FROM later_partition_lease WHERE namespace = %(namespace)s"
        " ORDER BY topic, partition_id LIMIT %(limit)s"
    )
    partition_sequences = (
        "SELECT topic, partition_id, next_sequence"
        " FROM later_partition_sequence WHERE namespace = %(namespace)s"
        " ORDER BY topic, partition_id LIMIT %(limit)s"
    )
    # Consumer-group positions: tables as small as topics x partitions (x groups).
    log_partition_ends = (
        "SELECT topic, partition_id, next_offset FROM later_log_partition"
        " WHERE namespace = %(namespace)s ORDER BY topic, partition_id LIMIT %(limit)s"
    )
    consumer_offsets = (
        "SELECT group_name, topic, partition_id, next_offset FROM later_log_consumer_offset"
        " WHERE namespace = %(namespace)s ORDER BY group_name, topic, partition_id"
        " LIMIT %(limit)s"
    )
    # Through the claim index (namespace, queue, priority, available_at).
    unclaimed_messages_published_between = (
        "SELECT sequence, payload FROM later_delivery_queue"
        " WHERE namespace = %(namespace)s AND priority = %(priority)s"
        " AND queue_name = %(queue_name)s"
        " AND available_at >= %(published_from)s AND available_at <= %(published_to)s"
        " AND lease_until IS NULL"
        " ORDER BY sequence LIMIT %(limit)s"
    )

    # Spelled per vendor.
    #: The first ready message of ``queue_name`` (``now``): its ``available_at``.
    oldest_ready: str
