"""Starting and finishing claimed jobs: the worker's writes.

A worker claims up to a batch of delivery messages, then :func:`start_batch`
reads the batch's records (one statement) and, in one transaction, writes them
``running`` with their index rows and execution leases (one statement per
table; :func:`plan_batch` and :meth:`BatchStart.commit` are its two halves,
so the worker can hand the jobs to their threads in between), failing at once
the jobs whose record cannot be decoded or whose task is not registered, and
retrying (as a failed attempt) jobs left ``running`` by a worker whose lease
lapsed. On PostgreSQL the claim has read the records already (migration 0008).

Jobs on topic partitions come from heads (:func:`start_heads`), not messages.
Every transaction that starts or finishes one is fenced: one statement extends
the worker's partition leases whose owner *and* epoch still match the claim. A
job whose partition lease was taken over (a higher epoch) is left untouched
and logged; its new owner treats the running attempt as lost (``WorkerLost``)
and retries or fails it by the retry policy.

:func:`finish_and_continue` writes the outcomes of finished jobs in one
transaction: acknowledgements, records, continuations of finished parents,
index rows, released leases, the delivery of retries and continuations, and
for partition jobs the next heads, which it may start at once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from later_django.compat.tasks import Task
from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.keys import job_key
from later_django.core.records import JobError, JobRecord, decode_record
from later_django.core.retry import RetryPolicy
from later_django.engine import cancellation, moves
from later_django.engine.cancellation import CancelFlag, Requests
from later_django.engine.continuations import (
    children_ranges,
    commit_releasing_children,
    release_children,
)
from later_django.engine.partition_changes import PartitionChanges
from later_django.engine.registry import resolve_task
from later_django.engine.writes import JobWrites, commit, write_tables
from later_django.exceptions import (
    JobCancelled,
    RecordDecodeError,
    UnregisteredTaskError,
    WorkerLost,
    class_path,
)
from later_django.storage.partitions import Fenced, HeadClaim, Partition
from later_django.storage.stores import Stores
from later_django.storage.types import ClaimedMessage, ExecutionLease

logger = logging.getLogger("later_django.engine")


@dataclass(frozen=True)
class HeldPartition:
    """The partition lease a job started from a partition head runs under."""

    topic: str
    partition_id: int
    epoch: int

    @property
    def partition(self) -> Partition:
        return (self.topic, self.partition_id)

    @property
    def fence(self) -> tuple[str, int, int]:
        """What the partition fence checks: ``(topic, partition_id, epoch)``."""
        return (self.topic, self.partition_id, self.epoch)


@dataclass
class StartedJob:
    """A job written ``running`` by this worker, ready to be called. It came either
    from a delivery message (``sequence``) or from a partition head (``held``, the
    partition lease it runs under); exactly one of the two is set. ``cancel`` is
    set once its cancel is requested (the task's ``context.cancelled``)."""

    record: JobRecord
    task: Task
    sequence: int | None = None
    held: HeldPartition | None = None
    cancel: CancelFlag = field(default_factory=CancelFlag, compare=False, repr=False)
    #: When the attempt times out (epoch ms), or None: no timeout.
    deadline_ms: int | None = None

    @property
    def partition(self) -> Partition | None:
        return None if self.held is None else self.held.partition

    @property
    def epoch(self) -> int | None:
        return None if self.held is None else self.held.epoch


@dataclass
class Outcome:
    """What running a job gave: a JSON-compatible return value, or an error.

    With an error, ``exception`` is the exception raised (kept in memory only, until
    the outcome is announced, so log lines can carry its traceback), and
    ``retryable`` False fails the job at once whatever its retry policy (a
    programming error such as a return value JSON cannot hold: running it again
    would repeat its side effects and fail the same way).

    Its job is written ``cancelled`` instead, whatever it holds, once the job's
    cancel flag (``started.cancel``) is set or when the error is ``JobCancelled``.
    """

    started: StartedJob
    return_value: Any = None
    error: JobError | None = None
    exception: BaseException | None = None
    retryable: bool = True
    #: How long the task ran (from its call to its return or raise).
    seconds: float = 0.0


@dataclass(frozen=True)
class _Worker:
    """Who writes, where, and how: the arguments every start and finish shares."""

    stores: Stores
    namespace: str
    worker_id: str
    lease_ms: int
    settings: LaterSettings
    #: The cancel requests the worker last read: such a job is cancelled, not started.
    cancels: Requests = cancellation.NONE

    def with_exact_cancels(self, job_ids: Sequence[str]) -> _Worker:
        """Itself, or, when its requests were cut off at the poll's limit, a copy that
        knows exactly which of ``job_ids`` are requested (read by key)."""
        if self.cancels.complete:
            return self
        requested = cancellation.requested_among(self.stores, self.namespace, job_ids)
        return dataclasses.replace(self, cancels=Requests(dict.fromkeys(requested)))


def task_timeout_ms(task: Task, settings: LaterSettings) -> int | None:
    """How long one attempt of ``task`` may run: its ``timeout`` option, else
    ``LATER["TIMEOUT"]``; None when neither is set."""
    seconds = getattr(task, "timeout", None)
    if seconds is None:
        seconds = settings.timeout_seconds
    return None if seconds is None else int(seconds * 1000)


def _deadline(task: Task, now: int, settings: LaterSettings) -> int | None:
    timeout = task_timeout_ms(task, settings)
    return None if timeout is None else now + timeout


def task_retry_policy(task: Task | None) -> RetryPolicy | None:
    """The task's own retry policy (``@task(retry={...})`` on a ``LaterTask``)."""
    raw = getattr(task, "retry", None)
    if task is None or raw is None:
        return None
    return RetryPolicy.from_mapping(raw, f"the retry option of task {task.module_path}")


# --- starting jobs from delivery messages ---


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
    worker: _Worker
    messages: Sequence[ClaimedMessage]
    now: int

    def commit(self) -> None:
        _commit_starts(self.writes, self.worker)

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
    worker = _Worker(stores, namespace, worker_id, lease_ms, settings, cancels)
    return _plan(messages, worker, now_ms())


def _plan(messages: Sequence[ClaimedMessage], worker: _Worker, now: int) -> BatchStart:
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
    worker: _Worker,
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
    worker: _Worker,
) -> StartedJob | None:
    """One message's moves (see :func:`start_batch`); the job to run, or None."""
    if record.stage == stages.RUNNING and (
        lease is not None and lease.owner != worker.worker_id and lease.lease_until_ms > now
    ):
        writes.hand_back(message.sequence, lease.lease_until_ms - now)
        return None
    if record.stage in (stages.ENQUEUED, stages.RUNNING) and record.job_id in worker.cancels:
        _cancel_requested(writes, record, now, worker)
        writes.ack(message.sequence)
        return None
    if record.stage == stages.RUNNING:
        lost = _worker_lost(
            record,
            now,
            f"worker {lease.owner if lease else 'unknown'} stopped renewing the "
            f"execution lease of attempt {record.attempts}",
        )
        moves.fail_attempt(writes, record, now, lost, worker.settings, _policy_or_none(record))
        writes.count_attempt(record, None)
        writes.ack(message.sequence)
        return None
    if record.stage == stages.ENQUEUED and message.deliveries > 1:
        why = (
            f"its message was delivered {message.deliveries} times and no start was "
            "written: an earlier claimer stopped before writing it (its task may have begun)"
        )
        policy = _policy_or_none(record)
        moves.fail_unwritten_start(writes, record, now, why, worker.settings, policy)
        writes.count_attempt(record, None)
        writes.ack(message.sequence)
        return None
    task = _task_or_refuse(writes, record, now, worker) if record.stage == stages.ENQUEUED else None
    if task is None:
        writes.ack(message.sequence)
        return None
    moves.start(writes, record, now, worker.worker_id, now + worker.lease_ms)
    deadline = _deadline(task, now, worker.settings)
    return StartedJob(record, task, sequence=message.sequence, deadline_ms=deadline)


def _cancel_requested(writes: JobWrites, record: JobRecord, now: int, worker: _Worker) -> None:
    """A requested cancel carried out at a start: the job is written cancelled (a
    partitioned one leaves its partition) and its request forgotten."""
    moves.cancel(writes, record, now, cancellation.REASON, worker.settings)
    writes.add(cancellation.forget(worker.namespace, record.job_id))


# --- starting jobs from partition heads ---


def start_heads(
    claims: Sequence[HeadClaim],
    *,
    stores: Stores,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
    cancels: Requests = cancellation.NONE,
) -> list[StartedJob]:
    """Starts the claimed partition heads in one transaction and returns those to run.

    The transaction opens with the partition fence (owner and epoch of each
    claim). Then, per head: ``enqueued`` starts; ``delayed`` or ``requeued`` (due)
    becomes ``enqueued`` and starts; ``running`` is an attempt of the partition's
    previous owner, lost with its lease: it fails as ``WorkerLost`` and is
    retried (or failed) by the retry policy, to be claimed again. A head whose
    record is gone or undecodable leaves its partition (failed when undecodable); a
    head in ``cancels`` is written cancelled and leaves it.
    """
    if not claims:
        return []
    worker = _Worker(stores, namespace, worker_id, lease_ms, settings, cancels)
    with transaction.atomic(using=stores.using, savepoint=False):
        kept = stores.partitions.fence(
            namespace,
            worker_id,
            {(claim.topic, claim.partition_id, claim.epoch) for claim in claims},
            now_ms() + lease_ms,
        )
        return _start_claims([claim for claim in claims if claim.partition in kept], worker)


def _start_claims(
    claims: Sequence[HeadClaim], worker: _Worker, carried: PartitionChanges | None = None
) -> list[StartedJob]:
    """Starts heads of fenced partitions; call inside the fencing transaction.
    ``carried``: partition changes of the same transaction not yet written, written
    with these (the heads move once, after every counter-moving write)."""
    now = now_ms()
    writes = JobWrites(worker.namespace, owner=worker.worker_id, lease_started_at_ms=now)
    if carried is not None:
        writes.partitions.merge(carried)
    worker = worker.with_exact_cancels([claim.job_id for claim in claims])
    started: list[StartedJob] = []
    for claim in claims:
        job = _start_claim(writes, claim, now, worker)
        if job is not None:
            started.append(job)
    _commit_starts(writes, worker)
    return started


def _start_claim(
    writes: JobWrites, claim: HeadClaim, now: int, worker: _Worker
) -> StartedJob | None:
    """One head's moves (see :func:`start_heads`); the job to run, or None."""
    if claim.record is None:
        logger.warning(
            "partition head %s has no record (deleted or expired); it leaves %r/%d",
            claim.job_id,
            claim.topic,
            claim.partition_id,
        )
        writes.partitions.leave(claim.job_id, claim.partition)
        return None
    try:
        record = decode_record(claim.record)
    except RecordDecodeError as error:
        logger.error("job %s: %s; marking it failed", claim.job_id, error)
        moves.replace_undecodable(
            writes,
            worker.namespace,
            claim.job_id,
            "",
            claim.record,
            str(error),
            now,
            worker.settings,
        )
        writes.partitions.leave(claim.job_id, claim.partition)
        return None
    if record.stage in stages.LIVE_STAGES and record.job_id in worker.cancels:
        _cancel_requested(writes, record, now, worker)
        return None
    if record.stage == stages.RUNNING:
        previous = record.worker_ids[-1] if record.worker_ids else "unknown"
        lost = _worker_lost(
            record,
            now,
            f"worker {previous} lost the lease of topic {claim.topic!r} partition "
            f"{claim.partition_id} while running attempt {record.attempts}",
        )
        moves.fail_attempt(writes, record, now, lost, worker.settings, _policy_or_none(record))
        writes.count_attempt(record, None)
        return None
    if record.stage in (stages.DELAYED, stages.REQUEUED):
        moves.make_ready(writes, record, now)
    if record.stage != stages.ENQUEUED:
        # Waiting (or already finished): the head is not runnable; recompute it.
        writes.partitions.touch(claim.partition)
        return None
    task = _task_or_refuse(writes, record, now, worker)
    if task is None:
        return None
    moves.start(writes, record, now, worker.worker_id, now + worker.lease_ms)
    held = HeldPartition(claim.topic, claim.partition_id, claim.epoch)
    return StartedJob(record, task, held=held, deadline_ms=_deadline(task, now, worker.settings))


# --- finishing ---


def finish_and_continue(
    outcomes: Sequence[Outcome],
    *,
    stores: Stores,
    namespace: str,
    worker_id: str,
    settings: LaterSettings,
    lease_ms: int = 30_000,
    slots: int = 0,
    cancels: Requests = cancellation.NONE,
) -> tuple[list[JobRecord], list[StartedJob]]:
    """Writes the outcomes in one transaction: success, a retry, or failure; the
    continuations of finished parents; leases released; messages acknowledged;
    for partition jobs the partition rows and heads. Returns the records as
    written, in the order of ``outcomes``, and the jobs it started: with
    ``slots`` > 0, the new runnable heads of the partitions just finished (at
    most ``slots``) are started in the same transaction, under its fence, which
    saves the worker a claim and a transaction per batch. Call outside a
    transaction.

    Partition fence: the transaction checks, in one statement that also locks
    them, that this worker still holds the leases of the partition jobs among
    ``outcomes`` at the epochs they were started under. It is checked after the
    outcomes are written (with the read of the next heads and of the finished
    jobs' continuations, in that statement on PostgreSQL): when a lease was
    taken over, the whole transaction rolls back and the batch is written again
    with the fence first. An outcome whose lease is lost changes nothing (it is
    logged, and its record is returned unchanged, still ``running``).
    """
    if not outcomes:
        return [], []
    worker = _Worker(stores, namespace, worker_id, lease_ms, settings, cancels)
    if not any(outcome.started.held is not None for outcome in outcomes):
        return _finish_queue_jobs(outcomes, worker), []
    written = _finish_then_fence(outcomes, worker, slots)
    if written is None:
        written = _fence_then_finish(outcomes, worker, slots)
    return written


def _finish_queue_jobs(outcomes: Sequence[Outcome], worker: _Worker) -> list[JobRecord]:
    """Outcomes of jobs from delivery messages only: no fence, no partition."""
    writes = JobWrites(worker.namespace, owner=worker.worker_id)
    records = _write_outcomes(writes, outcomes, set(), now_ms(), worker.settings)
    commit_releasing_children(writes, worker.stores, worker.settings)
    return records


def _finish_then_fence(
    outcomes: Sequence[Outcome], worker: _Worker, slots: int
) -> tuple[list[JobRecord], list[StartedJob]] | None:
    """The usual case, fence last: every outcome is written, then one statement
    fences the partitions and reads their next rows. None (everything rolled
    back) when a partition's lease was taken over meanwhile."""
    stores, now = worker.stores, now_ms()
    held = {job.held for job in (outcome.started for outcome in outcomes) if job.held}
    kept = {lease.partition for lease in held}
    writes = JobWrites(worker.namespace, owner=worker.worker_id)
    with transaction.atomic(using=stores.using, savepoint=False):
        records = _write_outcomes(writes, outcomes, kept, now, worker.settings)
        parents = write_tables(writes, stores)
        fenced = stores.partitions.fence_and_next(
            worker.namespace,
            worker.worker_id,
            {lease.fence for lease in held},
            now_ms() + worker.lease_ms,
            writes.partitions.exits,
            now,
            ranges=children_ranges(parents, worker.namespace),
        )
        if fenced.kept != kept:
            transaction.set_rollback(True, using=stores.using)
            return None
        following = fenced.following
        if fenced.members:
            following = _release_fenced_children(writes, parents, fenced, worker, now)
        started = _continue_partitions(writes, following, held, slots, worker)
    return records, started


def _release_fenced_children(
    writes: JobWrites, parents: list[JobRecord], fenced: Fenced, worker: _Worker, now: int
) -> list[tuple[HeadClaim, int]]:
    """Moves the continuations the fence found (their writes made, the partition
    changes kept in ``writes``), then reads the fenced partitions' next rows again:
    a continuation made ready may be one of them, and its stage has just changed."""
    stores = worker.stores
    release_children(writes, parents, stores, worker.settings, members=fenced.members)
    write_tables(writes, stores)
    return stores.partitions.next_rows(
        worker.namespace, sorted(fenced.kept), writes.partitions.exits, now
    )


def _fence_then_finish(
    outcomes: Sequence[Outcome], worker: _Worker, slots: int
) -> tuple[list[JobRecord], list[StartedJob]]:
    """After a lease was found taken over: the fence first, then only the outcomes
    of the partitions still held (and of jobs from messages) are written."""
    stores, now = worker.stores, now_ms()
    held = {job.held for job in (outcome.started for outcome in outcomes) if job.held}
    writes = JobWrites(worker.namespace, owner=worker.worker_id)
    with transaction.atomic(using=stores.using, savepoint=False):
        kept = stores.partitions.fence(
            worker.namespace,
            worker.worker_id,
            {lease.fence for lease in held},
            now + worker.lease_ms,
        )
        records = _write_outcomes(writes, outcomes, kept, now, worker.settings)
        held = {lease for lease in held if lease.partition in kept}
        if slots <= 0 or not kept:
            commit_releasing_children(writes, stores, worker.settings)
            return records, []
        _write_with_children(writes, worker)
        following = stores.partitions.next_rows(
            worker.namespace, sorted(kept), writes.partitions.exits, now
        )
        started = _continue_partitions(writes, following, held, slots, worker)
    return records, started


def record_lost_attempts(
    started: Sequence[StartedJob],
    *,
    stores: Stores,
    namespace: str,
    worker_id: str,
    settings: LaterSettings,
    why: str,
    error_class: type[BaseException] = WorkerLost,
) -> list[JobRecord]:
    """Fails now, as ``error_class`` (``WorkerLost``: the error a worker claiming them
    after the lapse records; ``TaskTimeout`` for attempts past their deadline), the
    attempts of ``started`` whose execution lease ``worker_id`` still holds, instead
    of leaving them to the lease's lapse.

    The error (``why`` its text) is written by the finish path: message
    acknowledged, lease released, a retry or the failure by the retry policy,
    continuations of a failed job moved, partition jobs only under their fence. One
    transaction, opened by renewing the execution leases: that statement is the
    fence (row locks on PostgreSQL, the write lock on SQLite), and an attempt whose
    lease this worker no longer holds (handed back already, or taken over) is left
    alone, so a second call changes nothing. Returns the records written; call
    outside a transaction.
    """
    if not started:
        return []
    worker = _Worker(stores, namespace, worker_id, 0, settings)
    now = now_ms()
    job_ids = [job.record.job_id for job in started]
    with transaction.atomic(using=stores.using, savepoint=False):
        held = set(stores.executions.lease_renew(namespace, worker_id, job_ids, now))
        outcomes = [
            Outcome(
                job,
                error=_attempt_error(error_class, job.record, now, why),
                seconds=_seconds_since_attempt(job.record, now),
            )
            for job in started
            if job.record.job_id in held
        ]
        if not outcomes:
            return []
        records, _ = _fence_then_finish(outcomes, worker, slots=0)
    return [record for record in records if record.stage != stages.RUNNING]


def _write_outcomes(
    writes: JobWrites,
    outcomes: Sequence[Outcome],
    kept: set[Partition],
    now: int,
    settings: LaterSettings,
) -> list[JobRecord]:
    """Each outcome's moves; the records as written, in order. An outcome of a
    partition not in ``kept`` (its lease was taken over) changes nothing: it is
    logged and its record returned unchanged."""
    records: list[JobRecord] = []
    for outcome in outcomes:
        started = outcome.started
        if started.held is not None and started.held.partition not in kept:
            logger.warning(
                "job %s: the lease of topic %r partition %d (epoch %d) was taken over; "
                "its outcome is discarded (the new owner retries the attempt)",
                started.record.job_id,
                started.held.topic,
                started.held.partition_id,
                started.held.epoch,
            )
            records.append(started.record)
            continue
        # A copy: when the write fails, the worker retries with the records unmoved.
        record = started.record.clone()
        records.append(record)
        if started.sequence is not None:
            writes.ack(started.sequence)
        writes.release_lease(record.job_id)
        # Read here, not when the task returned: a flag set meanwhile counts too.
        requested = started.cancel.is_set()
        if requested or _raised_cancel(outcome):
            reason = cancellation.REASON if requested else "the task raised JobCancelled"
            moves.cancel(writes, record, now, reason, settings)
            writes.add(cancellation.forget(record.namespace, record.job_id))
        elif outcome.error is None:
            moves.succeed(writes, record, now, outcome.return_value, settings)
        else:
            policy = task_retry_policy(started.task)
            moves.fail_attempt(
                writes, record, now, outcome.error, settings, policy, retryable=outcome.retryable
            )
        writes.count_attempt(record, outcome.seconds * 1000)
    return records


_CANCELLED_PATH = class_path(JobCancelled)


def _raised_cancel(outcome: Outcome) -> bool:
    return outcome.error is not None and outcome.error.exception_class_path == _CANCELLED_PATH


def _write_with_children(writes: JobWrites, worker: _Worker) -> None:
    """Writes the finishes' table writes, then the moves of their continuations,
    inside the finishing transaction; the partition changes stay in ``writes``."""
    parents = write_tables(writes, worker.stores)
    release_children(writes, parents, worker.stores, worker.settings)
    write_tables(writes, worker.stores)


def _continue_partitions(
    writes: JobWrites,
    following: list[tuple[HeadClaim, int]],
    held: set[HeldPartition],
    slots: int,
    worker: _Worker,
) -> list[StartedJob]:
    """Ends the finishing transaction: with ``slots``, starts the rows of
    ``following`` that become runnable heads of the ``held`` partitions (at most
    ``slots``), writing the finishes' partition changes with the starts' own so
    the heads move once; otherwise just writes the partition changes."""
    if slots <= 0 or not held:
        commit(writes, worker.stores)
        return []
    carried = writes.partitions.take()
    commit(writes, worker.stores)
    now = now_ms()
    epochs = {lease.partition: lease.epoch for lease in held}
    claims: list[HeadClaim] = []
    for claim, earliest in following:
        due = carried.run_at.get(claim.job_id, earliest) <= now
        runnable = claim.stage == stages.ENQUEUED or (
            claim.stage in (stages.DELAYED, stages.REQUEUED) and due
        )
        if runnable and len(claims) < slots:
            claims.append(dataclasses.replace(claim, epoch=epochs[claim.partition]))
    return _start_claims(claims, worker, carried)


def _commit_starts(writes: JobWrites, worker: _Worker) -> None:
    """Commits a start transaction; when it finished jobs (failed at once), their
    continuations move in the same transaction."""
    if writes.finished_records():
        commit_releasing_children(writes, worker.stores, worker.settings)
    else:
        commit(writes, worker.stores)


def _task_or_refuse(writes: JobWrites, record: JobRecord, now: int, worker: _Worker) -> Task | None:
    """The record's registered task, or None after writing the job ``failed`` (no
    retries: an unregistered task path will not become registered by waiting)."""
    try:
        return resolve_task(record.task_path)
    except UnregisteredTaskError as error:
        logger.error("job %s: %s; marking it failed", record.job_id, error)
        moves.refuse_unregistered(writes, record, now, worker.worker_id, error, worker.settings)
        writes.count_attempt(record, None)
        return None


def _policy_or_none(record: JobRecord) -> RetryPolicy | None:
    try:
        return task_retry_policy(resolve_task(record.task_path))
    except UnregisteredTaskError:
        return None


def _seconds_since_attempt(record: JobRecord, now: int) -> float:
    """How long the attempt of ``record`` has run at ``now`` (from its start as written)."""
    return max(0, now - (record.last_attempted_at_ms or now)) / 1000


def _worker_lost(record: JobRecord, now: int, why: str) -> JobError:
    """The error recorded for an attempt whose worker stopped holding its lease."""
    return _attempt_error(WorkerLost, record, now, why)


def _attempt_error(kind: type[BaseException], record: JobRecord, now: int, why: str) -> JobError:
    return JobError(
        exception_class_path=class_path(kind),
        traceback=why,
        at_ms=now,
        attempt=record.attempts,
    )
