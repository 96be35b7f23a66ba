"""Statements of topic partitions: sequences, partition rows, heads (leases: leases.py).

Tables: ``later_partition_sequence`` (next sequence per partition),
``later_partition_job`` (every queued row of a partition),
``later_partition_head`` (the lowest row of each active partition, with its
job's stage); the partition leases are
:data:`~later_django.storage.queries.leases.PARTITION_LEASES`.

Two shapes, given by the vendor's class: with ``batched`` (PostgreSQL) a
statement takes every partition of a call as arrays (``unnest``); without it
(SQLite) a statement takes one partition or row and the store runs them inside
one ``BEGIN IMMEDIATE`` transaction, where a statement costs no round trip.
Stages named here are the engine's stage names. ``%(prefix)s`` is the job
record key prefix (``core.keys.job_key_prefix``).
"""

from __future__ import annotations

from later_django.storage.driver import RowsStatement

HEAD_COLUMNS = "namespace, topic, partition_id, sequence, job_id, earliest_run_at, stage"

#: A head the worker may start: enqueued, or delayed/requeued and due; a running
#: head (not among the caller's own jobs) is an attempt lost with its old owner.
_RUNNABLE_HEAD = (
    "(h.stage IN ('enqueued', 'running') "
    "OR (h.stage IN ('delayed', 'requeued') AND h.earliest_run_at <= %(now)s))"
)

# With the head's job record (key prefix + job id, unexpired), so the start needs
# no second read: only the lease holder changes a head's record.
CLAIM_FROM = (
    "SELECT h.topic, h.partition_id, h.sequence, h.job_id, h.stage, l.epoch, s.value "
    "FROM later_partition_lease AS l JOIN later_partition_head AS h "
    "ON h.namespace = l.namespace AND h.topic = l.topic AND h.partition_id = l.partition_id "
    "LEFT JOIN later_storage AS s ON s.key = {record_key} "
    "AND (s.date_expire IS NULL OR s.date_expire > %(now)s) "
    "WHERE l.namespace = %(namespace)s AND l.owner = %(owner)s AND l.lease_until > %(now)s "
    "AND " + _RUNNABLE_HEAD
)
CLAIM_ORDER = " ORDER BY h.earliest_run_at, h.topic, h.partition_id LIMIT %(limit)s"


class PartitionQueries:
    """Partition statements; see the module docstring for the two shapes."""

    # Is any head runnable now, whoever holds it (--burst)?
    runnable_head_exists = (
        "SELECT 1 FROM later_partition_head AS h WHERE h.namespace = %(namespace)s AND "
        "(h.stage = 'enqueued' OR (h.stage IN ('delayed', 'requeued') "
        "AND h.earliest_run_at <= %(now)s)) LIMIT 1"
    )

    #: True: the statements below bind a call's partitions as arrays.
    batched: bool
    # Batched (PostgreSQL): one statement per call.
    sequence_allocate: str
    enter: str
    enter_notify: str
    advance: str
    #: One statement per call on both (SQLite: the partitions as a JSON array).
    next_rows: str
    heads_materialize: str
    # Per partition or row (SQLite), in one write transaction.
    jobs_insert: RowsStatement
    head_insert_if_absent: str
    jobs_delete: str
    job_run_at: str
    # SQLite, every partition of a call at once (a JSON array of [topic, partition_id]).
    head_recompute: str
    head_delete_if_empty: str
    # Both shapes.
    heads_claim: str
    #: ``renew`` of the partition leases and, for each lease kept, its partition's
    #: next row but the exits; then the live members of the ranges (batched only).
    fence_and_next: str
