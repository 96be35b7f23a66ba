"""One transaction's worth of job changes, gathered first and written together.

Every engine operation (enqueue, start a batch, finish a batch, promote due
jobs) fills a :class:`JobWrites` through its named operations and calls
:func:`commit`. The table writes become one
:class:`~later_django.storage.batch.WriteBatch` (the storage writes each table
once, in a fixed order); the partition changes
(:mod:`later_django.engine.partition_changes`) are written last, in the same
transaction.

An operation that must read what its first writes lock (the continuations of
finished jobs) writes in two steps inside one transaction: :func:`write_tables`,
then its reads and further changes, then :func:`commit`.

Metrics are handed to the in-memory accumulator only when the transaction
commits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from functools import partial

from django.db import transaction

from later_django.core import attempts, stages
from later_django.core.commands import execute_job_payloads
from later_django.core.records import JobRecord, encode_record
from later_django.engine import metrics, workflow_counts
from later_django.engine.partition_changes import PartitionChanges
from later_django.exceptions import TaskTimeout, class_path
from later_django.storage.batch import WriteBatch
from later_django.storage.stores import Stores
from later_django.storage.types import (
    JobIndexRemove,
    JobIndexRow,
    JobIndexUpsert,
    Set,
    StorageOperation,
)

_TIMEOUT_PATH = class_path(TaskTimeout)


class JobWrites:
    """Changes to write in one transaction for jobs of ``namespace``.

    ``owner``: the worker whose queue leases the acknowledgements and hand-backs
    release and whose execution leases (started at ``lease_started_at_ms``) are
    acquired or released.
    """

    def __init__(self, namespace: str, *, owner: str = "", lease_started_at_ms: int = 0) -> None:
        self.namespace = namespace
        self.owner = owner
        self.lease_started_at_ms = lease_started_at_ms
        #: record key -> (record, ttl seconds or None); the last write of a job wins.
        self.records: dict[str, tuple[JobRecord, float | None]] = {}
        self.table = self._new_table()
        self.partitions = PartitionChanges()
        self.metrics = metrics.MetricsBatch()
        self.after_commit: list[Callable[[], None]] = []
        #: (workflow id, stage) -> jobs in and out of it, for the workflows' counts.
        self.workflow_moves: dict[tuple[str, str], int] = {}

    def _new_table(self) -> WriteBatch:
        return WriteBatch(
            self.namespace, owner=self.owner, lease_started_at_ms=self.lease_started_at_ms
        )

    # --- named operations ---

    def save(self, record: JobRecord, ttl_seconds: float | None = None) -> None:
        """Writes ``record`` (expiring after ``ttl_seconds``, or never)."""
        self.records[record.key] = (record, ttl_seconds)

    def publish_job(self, record: JobRecord) -> None:
        """A delivery message that runs ``record`` on its queue and priority."""
        self.publish_jobs([record])

    def publish_jobs(self, records: Sequence[JobRecord]) -> None:
        """A delivery message per record, each on its record's queue and priority, in
        the order of ``records`` (encoded in one pass: ``enqueue_many`` publishes
        thousands)."""
        payloads = execute_job_payloads([(record.job_id, record.task_path) for record in records])
        publishes = self.table.publishes
        for record, payload in zip(records, payloads, strict=True):
            publishes[(record.queue_name, record.priority, None)].append(payload)

    def add(self, operation: StorageOperation) -> None:
        """A storage operation other than a record write (schedule entry, range, delete)."""
        self.table.operations.append(operation)

    def index(self, row: JobIndexRow) -> None:
        self.table.index_changes.append(JobIndexUpsert(row))

    def unindex(self, job_id: str) -> None:
        self.table.index_changes.append(JobIndexRemove(job_id))

    def ack(self, sequence: int) -> None:
        """The delivery message ``sequence`` is done with (deleted)."""
        self.table.acks.append(sequence)

    def hand_back(self, sequence: int, delay_ms: int) -> None:
        """The delivery message ``sequence`` is delivered again after ``delay_ms``."""
        self.table.nacks.append((sequence, delay_ms))

    def acquire_lease(self, job_id: str, until_ms: int, attempt: int) -> None:
        self.table.leases_acquired.append((job_id, until_ms, attempt))

    def release_lease(self, job_id: str) -> None:
        self.table.leases_released.append(job_id)

    def count_transition(self, record: JobRecord) -> None:
        """``record`` entered its stage (from the last stage of its history, if any):
        a metric sample, and its workflow's counts when it has one. Called once per
        move, right after it."""
        self.metrics.transitions.append((record.stage, record.stage_at_ms))
        if record.workflow_id is not None:
            self._count_in_workflow(record, record.workflow_id)

    def count_transitions(self, records: Sequence[JobRecord]) -> None:
        """:meth:`count_transition` of each of ``records``."""
        self.metrics.transitions += [(record.stage, record.stage_at_ms) for record in records]
        for record in records:
            if record.workflow_id is not None:
                self._count_in_workflow(record, record.workflow_id)

    def uncount(self, record: JobRecord) -> None:
        """``record`` is deleted: it leaves its workflow's count of its stage."""
        if record.workflow_id is not None:
            left = (record.workflow_id, record.stage)
            self.workflow_moves[left] = self.workflow_moves.get(left, 0) - 1

    def _count_in_workflow(self, record: JobRecord, workflow_id: str) -> None:
        moved = self.workflow_moves
        entered = (workflow_id, record.stage)
        moved[entered] = moved.get(entered, 0) + 1
        if record.history:
            left = (workflow_id, record.history[-1][0])
            moved[left] = moved.get(left, 0) - 1

    def count_wait(self, mode: str, wait_ms: int, at_ms: int) -> None:
        """A metric sample: a job of ``mode`` waited ``wait_ms`` before it started."""
        self.metrics.waits.append((mode, wait_ms, at_ms))

    def count_attempt(self, record: JobRecord, duration_ms: float | None) -> None:
        """A metric sample: an attempt of ``record`` ended, the record already moved to
        where it ended (its outcome is read from its stage and last error); it ran
        ``duration_ms`` (None: unknown, the attempt was found lost). A failing attempt
        carries its error's class path and its job id (the failure group's sample); every
        attempt carries the queue the job ran from."""
        error = record.errors[-1].exception_class_path if record.errors else ""
        outcome = attempts.attempt_outcome(record.stage, timed_out=error == _TIMEOUT_PATH)
        failing = outcome in attempts.FAILING_OUTCOMES
        self.metrics.attempts.append(
            (
                record.task_path,
                outcome,
                error if failing else "",
                duration_ms,
                record.job_id if failing else "",
                record.stage_at_ms,
                record.queue_name,
            )
        )

    def on_commit(self, callback: Callable[[], None]) -> None:
        self.after_commit.append(callback)

    # --- taking the writes ---

    def finished_records(self) -> list[JobRecord]:
        """The records gathered so far that are written in a finished stage."""
        return [record for record, _ in self.records.values() if record.stage in stages.FINISHED]

    def take_batch(self) -> tuple[WriteBatch, list[JobRecord]]:
        """The table writes gathered so far as a storage batch (records encoded, in key
        order) and the records taken; both are forgotten here. Partition changes,
        metrics and callbacks stay."""
        written = [record for record, _ in self.records.values()]
        batch = self.table
        # A record written with an expiry is a finished job's: its index row carries
        # the same expiry, so the record's is kept where no index holds it (the
        # finishing update stays HOT) and the job index's sweep deletes both.
        batch.operations[:0] = [
            Set(key, encode_record(record), ttl, swept_with_job_index=ttl is not None)
            for key, (record, ttl) in sorted(self.records.items())
        ]
        if self.workflow_moves:
            batch.operations += workflow_counts.increments(self.namespace, self.workflow_moves)
            self.workflow_moves = {}
        self.records, self.table = {}, self._new_table()
        return batch, written

    def is_empty(self) -> bool:
        return not self.records and self.table.is_empty() and self.partitions.is_empty()


def write_tables(writes: JobWrites, stores: Stores) -> list[JobRecord]:
    """Writes the table writes gathered so far in ``writes`` (call inside a
    transaction) and returns the records written; the partition changes, metrics
    and callbacks stay for :func:`commit`."""
    batch, written = writes.take_batch()
    stores.batch.write(batch)
    return written


def commit(writes: JobWrites, stores: Stores, *, savepoint: bool = False) -> None:
    """Writes ``writes`` atomically on ``stores``, joining the caller's transaction
    (with no savepoint unless asked). Nothing is written when any statement fails.

    The table writes go through the storage's batch writer
    (:mod:`later_django.storage.batch`): one statement where the driver combines
    them, else one per table; partition changes need a transaction around
    everything. The metric samples go to the accumulator, and the ``after_commit``
    callbacks run, when the transaction commits.
    """
    if writes.is_empty() and writes.metrics.is_empty():
        return
    using, writer = stores.using, stores.batch
    batch, _ = writes.take_batch()
    needs_transaction = writer.needs_transaction(batch) or not writes.partitions.is_empty()
    with (
        transaction.atomic(using=using, savepoint=savepoint) if needs_transaction else nullcontext()
    ):
        writer.write(batch)
        writes.partitions.write(stores, writes.namespace)
        batch_metrics, callbacks = writes.metrics, list(writes.after_commit)
        writes.metrics, writes.after_commit = metrics.MetricsBatch(), []
        if not batch_metrics.is_empty():
            namespace = writes.namespace
            callbacks.insert(0, lambda: metrics.accumulator.add(namespace, using, batch_metrics))
        if callbacks:
            # One registration for all (an enqueue pays per on_commit); in order, and
            # like separate ones, a callback that raises stops those after it.
            transaction.on_commit(partial(_run_in_order, callbacks), using=using)


def _run_in_order(callbacks: list[Callable[[], None]]) -> None:
    for callback in callbacks:
        callback()
