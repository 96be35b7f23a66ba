"""One transaction's worth of job changes, gathered first and written together.

Every engine operation (enqueue, start a batch, finish a batch, promote due
jobs) fills a :class:`JobWrites` and calls :func:`commit`. The table writes
become one :class:`~later_django.storage.batch.WriteBatch` (the storage writes
each table once, in a fixed order); partition rows and heads are written last,
by :mod:`later_django.engine.partitions`, in the same transaction.

Metrics are handed to the in-memory accumulator only when the transaction
commits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

from django.db import transaction

from later_django.core.commands import ExecuteJob, encode_command
from later_django.core.records import JobRecord, encode_record
from later_django.engine import metrics
from later_django.storage.batch import WriteBatch
from later_django.storage.partitions import PartitionEntry
from later_django.storage.stores import stores_for
from later_django.storage.types import (
    JobIndexChange,
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
    #: The records of the last batch taken (what ``after_records`` receives).
    written: list[JobRecord] = field(default_factory=list)

    def save(self, record: JobRecord, ttl_seconds: float | None = None) -> None:
        self.records[record.key] = (record, ttl_seconds)

    def publish_job(self, record: JobRecord) -> None:
        payload = encode_command(ExecuteJob(record.job_id, record.task_path))
        self.publishes[(record.queue_name, record.priority, None)].append(payload)

    def take_batch(self) -> WriteBatch:
        """The table writes gathered so far as a storage batch (records encoded,
        in key order), forgotten here; ``written`` keeps the records taken."""
        self.written = [record for record, _ in self.records.values()]
        operations: list[StorageOperation] = [
            Set(key, encode_record(record), ttl)
            for key, (record, ttl) in sorted(self.records.items())
        ]
        batch = WriteBatch(
            self.namespace,
            owner=self.ack_owner or self.lease_owner or "",
            acks=self.acks,
            nacks=self.nacks,
            operations=operations + self.other_operations,
            index_changes=self.index_changes,
            lease_started_at_ms=self.lease_started_at_ms,
            leases_acquired=self.leases_acquired,
            leases_released=self.leases_released,
            publishes=self.publishes,
        )
        self.records, self.other_operations, self.index_changes = {}, [], []
        self.acks, self.nacks, self.publishes = [], [], defaultdict(list)
        self.leases_acquired, self.leases_released = [], []
        return batch

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


def commit(writes: JobWrites, using: str, *, savepoint: bool = False) -> None:
    """Writes ``writes`` atomically on ``using``, joining the caller's transaction
    (with no savepoint unless asked). Nothing is written when any statement fails.

    The table writes go through the storage's batch writer
    (:mod:`later_django.storage.batch`): one statement where the driver combines
    them, else one per table. The ``after_records`` hook and the partition
    changes need a transaction around everything.
    """
    if writes.is_empty():
        return
    writer = stores_for(using).batch
    batch = writes.take_batch()
    needs_transaction = (
        writer.needs_transaction(batch)
        or writes.after_records is not None
        or writes.has_partition_changes()
    )
    with (
        transaction.atomic(using=using, savepoint=savepoint) if needs_transaction else nullcontext()
    ):
        written = writes.written
        writer.write(batch)
        if writes.after_records is not None:
            hook, writes.after_records = writes.after_records, None
            hook(writes, written)
            writer.write(writes.take_batch())
        if writes.has_partition_changes() and not writes.defer_partition_changes:
            from later_django.engine.partitions import write_partition_changes

            write_partition_changes(writes, using)
        batch_metrics = writes.metrics
        callbacks = list(writes.after_commit)
        if not batch_metrics.is_empty():
            namespace = writes.namespace
            callbacks.insert(0, lambda: metrics.accumulator.add(namespace, using, batch_metrics))
        for callback in callbacks:
            transaction.on_commit(callback, using=using)
