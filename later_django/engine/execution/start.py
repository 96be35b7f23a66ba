"""Starting jobs from delivery messages: the worker's start write of a claimed batch.

A worker claims up to a batch of delivery messages, then :func:`start_batch`
reads the batch's records (one statement) and, in one transaction, writes them
``running`` with their index rows and execution leases (one statement per
table; :func:`plan_batch` and :meth:`BatchStart.commit` are its two halves,
so the worker can hand the jobs to their threads in between), failing at once
the jobs whose record cannot be decoded or whose task is not registered, and
retrying (as a failed attempt) jobs left ``running`` by a worker whose lease
lapsed. On PostgreSQL the claim has read the records already (migration 0008).

Also the moves every start shares (:func:`cancel_requested`,
:func:`task_or_refuse`, :func:`commit_starts`), which the heads' start uses too.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from later_django.compat.tasks import Task
from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record
from later_django.engine import cancellation, moves
from later_django.engine.cancellation import Requests
from later_django.engine.continuations import commit_releasing_children
from later_django.engine.execution.values import (
    StartedJob,
    WorkerArgs,
    attempt_deadline,
    policy_or_none,
    worker_lost,
)
from later_django.engine.registry import resolve_task
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import RecordDecodeError, UnregisteredTaskError
from later_django.storage.stores import Stores
from later_django.storage.types import ClaimedMessage, ExecutionLease

logger = logging.getLogger("later_django.engine")


def start_batch(
    messages: Sequence[ClaimedMessage],
    *,
    stores: Stores,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
    cancels: Requests = cancellation.NONE,
) -> list[StartedJob]:
    """Writes the claimed jobs ``running`` (one transaction) and returns those to run.

    Messages that are not jobs, or whose job is gone, finished or not runnable
    now are acknowledged (or handed back, when another worker's execution lease
    is still current) in the same transaction; a job in ``cancels`` is written
    cancelled instead of started. :func:`plan_batch` then :meth:`BatchStart.commit`.
    """
    start = plan_batch(
        messages,
        stores=stores,
        namespace=namespace,
        worker_id=worker_id,
        lease_ms=lease_ms,
        settings=settings,
        cancels=cancels,
    )
    start.commit()
    return start.started


@dataclass
class BatchStart:
    """A batch's start, decided at ``now`` but not yet written: ``started`` are the jobs
    to run, :meth:`commit` writes every move of the batch (one transaction)."""

    started: list[StartedJob]
    writes: JobWrites
    worker: WorkerArgs
    messages: Sequence[ClaimedMessage]
    now: int

    def commit(self) -> None:
        commit_starts(self.writes, self.worker)

    def commit_again(self) -> tuple[list[StartedJob], list[StartedJob]]:
        """After :meth:`commit` failed while ``started`` already ran (decision 112):
        writes the batch's start in one transaction opened by renewing this worker's
        claims of every message of the batch, which is the fence. When all are still
        held the batch is planned again from the records as stored, at the same
        ``now`` (so an unchanged job gets the very record it runs with), and written;
        otherwise nothing is written. Returns the jobs to launch now (started by the
        new plan, not by the first) and the jobs to abandon (started by the first
        plan and not by the new one, or every one when a claim was lost: their
        outcomes must be dropped; their messages are redelivered once the claims
        lapse, and the next claim counts the lost attempt). Raises the database
        error, writing nothing."""
        worker = self.worker
        stores = worker.stores
        if self._first_write_committed():
            return [], []
        sequences = [message.sequence for message in self.messages]
        with transaction.atomic(using=stores.using, savepoint=False):
            held = stores.queue.renew(worker.worker_id, sequences, worker.lease_ms)
            if len(held) != len(sequences):
                transaction.set_rollback(True, using=stores.using)
                return [], list(self.started)
            # The claim's record hints are from before the failed write: read again.
            unhinted = [dataclasses.replace(message, record=None) for message in self.messages]
            again = _plan(unhinted, worker, self.now)
            again.commit()
        first = {job.record.job_id for job in self.started}
        planned = {job.record.job_id for job in again.started}
        launch = [job for job in again.started if job.record.job_id not in first]
        abandon = [job for job in self.started if job.record.job_id not in planned]
        return launch, abandon

    def _first_write_committed(self) -> bool:
        """Whether the failed :meth:`commit` did commit, its answer lost (MariaDB's
        ``KILL CONNECTION`` during the ``COMMIT``, a connection cut after it): every
        job it started is stored with the very record it runs with. Then the jobs run
        under that write and nothing is to be written again (planned again, a running
        record under this worker's claim reads as a lost attempt: the job would be
        requeued while it runs, and its outcome dropped)."""
        if not self.started:
            return False
        namespace, kv = self.worker.namespace, self.worker.stores.kv
        keys = {job_key(namespace, job.record.job_id): job.record for job in self.started}
        stored = kv.get_many(list(keys))
        return all(
            key in stored and decode_record(stored[key]) == record for key, record in keys.items()
        )

    def unstarted(self, messages: Sequence[ClaimedMessage]) -> list[int]:
        """The sequences of ``messages`` (the batch) whose job is not in ``started``."""
        running = {job.sequence for job in self.started}
        return [message.sequence for message in messages if message.sequence not in running]


def plan_batch(
    messages: Sequence[ClaimedMessage],
    *,
    stores: Stores,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
    cancels: Requests = cancellation.NONE,
) -> BatchStart:
    """Reads the batch's records and decides each message's move (see
    :func:`start_batch`); writes nothing. The worker hands the jobs in ``started`` to
    their threads, then writes the start with :meth:`BatchStart.commit` (decision 112:
    a job lost before that write commits is counted by the next claim of its message)."""
    worker = WorkerArgs(stores, namespace, worker_id, lease_ms, settings, cancels)
    return _plan(messages, worker, now_ms())


def _plan(messages: Sequence[ClaimedMessage], worker: WorkerArgs, now: int) -> BatchStart:
    """:func:`plan_batch` for ``worker``, deciding at ``now``."""
    namespace, stores = worker.namespace, worker.stores
    writes = JobWrites(namespace, owner=worker.worker_id, lease_started_at_ms=now)
    commands = _job_commands(messages, writes)
    records = _claimed_records(commands, writes, worker, now)
    worker = worker.with_exact_cancels(list(records))
    running = [job_id for job_id, record in records.items() if record.stage == stages.RUNNING]
    leases = stores.executions.lease_get_many(namespace, running) if running else {}
    started: list[StartedJob] = []
    for message, command in commands:
        record = records.get(command.job_id)
        if record is not None:
            job = _start_message(writes, message, record, leases.get(record.job_id), now, worker)
            if job is not None:
                started.append(job)
    return BatchStart(started, writes, worker, messages, now)


def _job_commands(
    messages: Sequence[ClaimedMessage], writes: JobWrites
) -> list[tuple[ClaimedMessage, ExecuteJob]]:
    """The messages that are job commands; the others are acknowledged (dropped)."""
    commands: list[tuple[ClaimedMessage, ExecuteJob]] = []
    for message in messages:
        try:
            command = decode_command(message.payload)
        except RecordDecodeError as error:
            logger.error("dropping undecodable queue message %s: %s", message.sequence, error)
            writes.ack(message.sequence)
            continue
        if not isinstance(command, ExecuteJob):
            logger.warning("dropping queue message %s: not a job (%r)", message.sequence, command)
            writes.ack(message.sequence)
            continue
        commands.append((message, command))
    return commands


def _claimed_records(
    commands: list[tuple[ClaimedMessage, ExecuteJob]],
    writes: JobWrites,
    worker: WorkerArgs,
    now: int,
) -> dict[str, JobRecord]:
    """The records of ``commands``' jobs, by job id: those the claim read already
    (:attr:`ClaimedMessage.record`, used only when its key is the job's), the
    others in one statement. A message whose record is gone is acknowledged; an
    undecodable record is written failed and its message acknowledged."""
    namespace = worker.namespace
    raws: dict[str, bytes | None] = {}
    for message, command in commands:
        key = job_key(namespace, command.job_id)
        if message.record is not None and message.record[0] == key:
            raws[key] = message.record[1]
    unread = [
        key
        for key in (job_key(namespace, command.job_id) for _, command in commands)
        if key not in raws
    ]
    if unread:
        raws.update(worker.stores.kv.get_many(unread))
    records: dict[str, JobRecord] = {}
    for message, command in commands:
        raw = raws.get(job_key(namespace, command.job_id))
        if raw is None:
            logger.warning(
                "job %s has no record (deleted or expired); dropping its message", command.job_id
            )
            writes.ack(message.sequence)
            continue
        try:
            records[command.job_id] = decode_record(raw)
        except RecordDecodeError as error:
            logger.error("job %s: %s; marking it failed", command.job_id, error)
            moves.replace_undecodable(
                writes,
                namespace,
                command.job_id,
                command.payload_type,
                raw,
                str(error),
                now,
                worker.settings,
            )
            writes.ack(message.sequence)
    return records


def _start_message(
    writes: JobWrites,
    message: ClaimedMessage,
    record: JobRecord,
    lease: ExecutionLease | None,
    now: int,
    worker: WorkerArgs,
) -> StartedJob | None:
    """One message's moves (see :func:`start_batch`); the job to run, or None."""
    if record.stage == stages.RUNNING and (
        lease is not None and lease.owner != worker.worker_id and lease.lease_until_ms > now
    ):
        writes.hand_back(message.sequence, lease.lease_until_ms - now)
        return None
    if record.stage in (stages.ENQUEUED, stages.RUNNING) and record.job_id in worker.cancels:
        cancel_requested(writes, record, now, worker)
        writes.ack(message.sequence)
        return None
    if record.stage == stages.RUNNING:
        lost = worker_lost(
            record,
            now,
            f"worker {lease.owner if lease else 'unknown'} stopped renewing the "
            f"execution lease of attempt {record.attempts}",
        )
        policy = policy_or_none(record, worker.settings)
        moves.fail_attempt(writes, record, now, lost, worker.settings, policy)
        writes.count_attempt(record, None)
        writes.ack(message.sequence)
        return None
    if record.stage == stages.ENQUEUED and message.deliveries > 1:
        why = (
            f"its message was delivered {message.deliveries} times and no start was "
            "written: an earlier claimer stopped before writing it (its task may have begun)"
        )
        policy = policy_or_none(record, worker.settings)
        moves.fail_unwritten_start(writes, record, now, why, worker.settings, policy)
        writes.count_attempt(record, None)
        writes.ack(message.sequence)
        return None
    task = task_or_refuse(writes, record, now, worker) if record.stage == stages.ENQUEUED else None
    if task is None:
        writes.ack(message.sequence)
        return None
    moves.start(writes, record, now, worker.worker_id, now + worker.lease_ms)
    deadline = attempt_deadline(task, now, worker.settings)
    return StartedJob(
        record, task, sequence=message.sequence, deadline_ms=deadline, stores=worker.stores
    )


def cancel_requested(writes: JobWrites, record: JobRecord, now: int, worker: WorkerArgs) -> None:
    """A requested cancel carried out at a start: the job is written cancelled (a
    partitioned one leaves its partition) and its request forgotten."""
    moves.cancel(writes, record, now, cancellation.REASON, worker.settings)
    writes.add(cancellation.forget(worker.namespace, record.job_id))


def commit_starts(writes: JobWrites, worker: WorkerArgs) -> None:
    """Commits a start transaction; when it finished jobs (failed at once), their
    continuations move in the same transaction."""
    if writes.finished_records():
        commit_releasing_children(writes, worker.stores, worker.settings)
    else:
        commit(writes, worker.stores)


def task_or_refuse(
    writes: JobWrites, record: JobRecord, now: int, worker: WorkerArgs
) -> Task | None:
    """The record's registered task, or None after writing the job ``failed`` (no
    retries: an unregistered task path will not become registered by waiting)."""
    try:
        return resolve_task(record.task_path)
    except UnregisteredTaskError as error:
        logger.error("job %s: %s; marking it failed", record.job_id, error)
        moves.refuse_unregistered(writes, record, now, worker.worker_id, error, worker.settings)
        writes.count_attempt(record, None)
        return None
