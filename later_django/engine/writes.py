"""One transaction's worth of job changes, gathered first and written together.

Every engine operation (enqueue, start a batch, finish a batch, promote due
jobs) fills a :class:`JobWrites` and calls :func:`commit`, which writes each
table once for the whole batch, always in the same order so that concurrent
workers never wait on each other in a circle:

1. delivery rows handed back or acknowledged (``later_delivery_queue``);
2. records and schedule entries (``later_storage``, ``later_storage_range``);
3. index rows (``later_jobs_index``; triggers move ``later_stage_counts``);
4. execution leases (``later_job_execution``);
5. new delivery rows (publish; triggers move ``later_queue_depth``), with the
   PostgreSQL wake-up notification in the same statement;
6. partition rows, then partition heads (``engine.partitions``), in separate
   statements after the rest.

On PostgreSQL the same parts, in the same order, are one combined statement.

Metrics are handed to the in-memory accumulator only when the transaction
commits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

from django.db import connections, transaction

from later_django.core.clock import now_ms
from later_django.core.commands import ExecuteJob, encode_command
from later_django.core.records import JobRecord, encode_record
from later_django.engine import metrics
from later_django.storage.combined import CombinedWrite
from later_django.storage.django import DjangoStorage
from later_django.storage.partitions import PartitionEntry
from later_django.storage.queue import SqlDeliveryQueue
from later_django.storage.types import (
    Delete,
    JobIndexChange,
    JobIndexRemove,
    JobIndexUpsert,
    RangeClear,
    Set,
    StorageOperation,
)


@dataclass
class JobWrites:
    """Changes to write in one transaction for jobs of ``namespace``."""

    namespace: str
    #: record key -> (record, ttl seconds or None); the last write of a job wins.
    records: dict[str, tuple[JobRecord, float | None]] = field(default_factory=dict)
    other_operations: list[StorageOperation] = field(default_factory=list)
    index_changes: list[JobIndexChange] = field(default_factory=list)
    #: (queue, priority, available_at or None) -> payloads
    publishes: dict[tuple[str, int, int | None], list[bytes]] = field(
        default_factory=lambda: defaultdict(list)
    )
    ack_owner: str | None = None
    acks: list[int] = field(default_factory=list)
    nacks: list[tuple[int, int]] = field(default_factory=list)
    lease_owner: str | None = None
    lease_started_at_ms: int = 0
    leases_acquired: list[tuple[str, int, int]] = field(default_factory=list)
    leases_released: list[str] = field(default_factory=list)
    metrics: metrics.MetricsBatch = field(default_factory=metrics.MetricsBatch)
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    #: Runs inside the transaction right after the records are written and
    #: before the index: it may read what those writes lock and add changes.
    after_records: Callable[[JobWrites, list[JobRecord]], None] | None = None
    #: Topic partitions (written last, see ``engine.partitions``): rows entering
    #: partitions, job ids leaving them, new earliest run times by job id, and
    #: the partitions whose head must be recomputed.
    partition_entries: list[PartitionEntry] = field(default_factory=list)
    partition_exits: list[str] = field(default_factory=list)
    partition_run_at: dict[str, int] = field(default_factory=dict)
    partitions_touched: set[tuple[str, int]] = field(default_factory=set)
    #: When set, commit() leaves the partition changes in place for the caller to
    #: write later in the same transaction.
    defer_partition_changes: bool = False

    def save(self, record: JobRecord, ttl_seconds: float | None = None) -> None:
        self.records[record.key] = (record, ttl_seconds)

    def publish_job(self, record: JobRecord) -> None:
        payload = encode_command(ExecuteJob(record.job_id, record.task_path))
        self.publishes[(record.queue_name, record.priority, None)].append(payload)

    def is_empty(self) -> bool:
        return not (
            self.records
            or self.other_operations
            or self.index_changes
            or self.publishes
            or self.acks
            or self.nacks
            or self.leases_acquired
            or self.leases_released
            or self.has_partition_changes()
        )

    def has_partition_changes(self) -> bool:
        return bool(
            self.partition_entries
            or self.partition_exits
            or self.partition_run_at
            or self.partitions_touched
        )


def _wants_notification(using: str) -> bool:
    """True once per transaction: PostgreSQL wakes listeners at commit, so the
    first publish of a transaction carries the notification and later ones
    need not (PostgreSQL would fold them anyway)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return False
    if not connection.in_atomic_block:
        return True
    if any(callback is _notified_marker for _, callback, _ in connection.run_on_commit):
        return False
    transaction.on_commit(_notified_marker, using=using)
    return True


def _notified_marker() -> None:
    """Registered with ``on_commit`` to mark a transaction that already notifies."""


def commit(writes: JobWrites, using: str, *, savepoint: bool = False) -> None:
    """Writes ``writes`` atomically on ``using``, joining the caller's transaction
    (with no savepoint unless asked). Nothing is written when any statement fails.

    PostgreSQL writes the batch as one combined statement (see
    :mod:`later_django.storage.combined`); outside a transaction that statement is
    the transaction. SQLite, and batches one statement cannot express, write one
    statement per table inside a transaction.
    """
    if writes.is_empty():
        return
    combined = connections[using].vendor == "postgresql" and _combinable(writes)
    needs_transaction = (
        not combined or writes.after_records is not None or writes.has_partition_changes()
    )
    with (
        transaction.atomic(using=using, savepoint=savepoint) if needs_transaction else nullcontext()
    ):
        written = (_write_combined if combined else _write_per_table)(writes, using)
        if writes.after_records is not None:
            hook, writes.after_records = writes.after_records, None
            hook(writes, written)
            if not writes.is_empty():
                rest = _write_combined if combined and _combinable(writes) else _write_per_table
                rest(writes, using)
        if writes.has_partition_changes() and not writes.defer_partition_changes:
            from later_django.engine.partitions import write_partition_changes

            write_partition_changes(writes, using, notify=_wants_notification)
        batch = writes.metrics
        callbacks = list(writes.after_commit)
        if not batch.is_empty():
            namespace = writes.namespace
            callbacks.insert(0, lambda: metrics.accumulator.add(namespace, using, batch))
        for callback in callbacks:
            transaction.on_commit(callback, using=using)


def _combinable(writes: JobWrites) -> bool:
    """Whether one statement can write ``writes``: no hand-backs, only Sets,
    Deletes and range clears among the other operations, and no job both removed
    from and written to the index (a statement may not touch a row twice)."""
    if writes.nacks:
        return False
    if any(not isinstance(op, Set | Delete | RangeClear) for op in writes.other_operations):
        return False
    removed = {c.job_id for c in writes.index_changes if isinstance(c, JobIndexRemove)}
    upserted = {c.row.job_id for c in writes.index_changes if isinstance(c, JobIndexUpsert)}
    return not removed & upserted


def _write_combined(writes: JobWrites, using: str) -> list[JobRecord]:
    """PostgreSQL: everything gathered as one statement, in the table order above."""
    storage = DjangoStorage(using)
    queue = SqlDeliveryQueue(using)
    namespace = writes.namespace
    statement = CombinedWrite(using)
    if writes.acks:
        statement.add(*queue.ack_part(writes.ack_owner or "", writes.acks))
    written = [record for record, _ in writes.records.values()]
    sets = [Set(key, encode_record(record), ttl) for key, (record, ttl) in writes.records.items()]
    sets += [op for op in writes.other_operations if isinstance(op, Set)]
    if sets:
        statement.add(*storage.set_many_part(sets, now_ms()))
    deletes = [op.key for op in writes.other_operations if isinstance(op, Delete)]
    if deletes:
        statement.add(*storage.delete_many_part(deletes))
    cleared = [op.key for op in writes.other_operations if isinstance(op, RangeClear)]
    if cleared:
        statement.add(*storage.range_clear_many_part(cleared))
    removed = [c.job_id for c in writes.index_changes if isinstance(c, JobIndexRemove)]
    upserted = [c.row for c in writes.index_changes if isinstance(c, JobIndexUpsert)]
    for part in (
        storage.job_index_remove_part(namespace, removed),
        storage.job_index_upsert_part(namespace, upserted),
    ):
        if part is not None:
            statement.add(*part)
    if writes.leases_acquired:
        statement.add(
            *storage.lease_acquire_part(
                namespace,
                writes.lease_owner or "",
                writes.lease_started_at_ms,
                writes.leases_acquired,
            )
        )
    if writes.leases_released:
        statement.add(
            *storage.lease_release_part(namespace, writes.lease_owner or "", writes.leases_released)
        )
    for (queue_name, priority, available_at), payloads in _publish_groups(writes):
        statement.add(*queue.publish_part(namespace, queue_name, payloads, priority, available_at))
    notify = namespace if writes.publishes and _wants_notification(using) else None
    _forget_written(writes)
    statement.execute(notify)
    return written


def _write_per_table(writes: JobWrites, using: str) -> list[JobRecord]:
    """One statement per table, in the table order above; call inside a transaction."""
    storage = DjangoStorage(using)
    queue = SqlDeliveryQueue(using)
    namespace = writes.namespace
    if writes.acks:
        queue.ack(writes.ack_owner or "", sorted(writes.acks))
    for sequence, delay_ms in writes.nacks:
        queue.nack(writes.ack_owner or "", [sequence], delay_ms)
    written = _write_records(storage, writes)
    if writes.index_changes:
        storage.apply_with_job_index([], namespace, writes.index_changes, savepoint=False)
    if writes.leases_acquired:
        storage.lease_acquire_many(
            namespace,
            writes.lease_owner or "",
            writes.lease_started_at_ms,
            writes.leases_acquired,
        )
    if writes.leases_released:
        storage.lease_release_many(namespace, writes.lease_owner or "", writes.leases_released)
    for (queue_name, priority, available_at), payloads in _publish_groups(writes):
        queue.publish(
            namespace,
            queue_name,
            payloads,
            priority,
            available_at,
            notify=namespace if _wants_notification(using) else None,
        )
    _forget_written(writes)
    return written


def _publish_groups(
    writes: JobWrites,
) -> list[tuple[tuple[str, int, int | None], list[bytes]]]:
    """The messages to publish, one group per (queue, priority, available_at), in
    queue and priority order."""
    return sorted(writes.publishes.items(), key=lambda item: (item[0][0], item[0][1]))


def _forget_written(writes: JobWrites) -> None:
    """Empties what was written; metrics, callbacks and the hook stay."""
    writes.records = {}
    writes.other_operations = []
    writes.index_changes = []
    writes.publishes = defaultdict(list)
    writes.acks = []
    writes.nacks = []
    writes.leases_acquired = []
    writes.leases_released = []


def _write_records(storage: DjangoStorage, writes: JobWrites) -> list[JobRecord]:
    """Writes the records and other operations gathered so far, forgets them, and
    returns the records written."""
    operations: list[StorageOperation] = [
        Set(key, encode_record(record), ttl)
        for key, (record, ttl) in sorted(writes.records.items())
    ]
    operations += writes.other_operations
    written = [record for record, _ in writes.records.values()]
    writes.records, writes.other_operations = {}, []
    storage.apply(_grouped(operations), savepoint=False)
    return written


def _grouped(operations: list[StorageOperation]) -> list[StorageOperation]:
    """Sets first, then Deletes, then the rest in their order: runs of Sets and of
    Deletes are one statement each (callers never Set and Delete one key)."""
    sets = [operation for operation in operations if isinstance(operation, Set)]
    deletes = [operation for operation in operations if isinstance(operation, Delete)]
    rest = [operation for operation in operations if not isinstance(operation, Set | Delete)]
    return sets + deletes + rest
