"""Starting and finishing batches of claimed jobs: the worker's writes.

A worker claims up to a batch of delivery messages, then:

* :func:`start_batch` reads the batch's records (one statement) and, in one
  transaction, writes them ``running`` with their index rows and execution
  leases (one statement per table), failing at once the jobs whose record
  cannot be decoded or whose task is not registered, and retrying (as a failed
  attempt) jobs left ``running`` by a worker whose lease lapsed;
* :func:`finish_batch` writes the outcomes of finished jobs in one transaction:
  acknowledgements, records, continuations of finished parents, index rows,
  released leases, and the delivery of retries and continuations.

Jobs on topic partitions come from heads (:func:`start_heads`), not messages.
Every transaction that starts or finishes one opens with the partition fence:
one statement extends the worker's partition leases whose owner *and* epoch
still match the claim. A job whose partition lease was taken over (a higher
epoch) is left untouched and logged; its new owner treats the running attempt
as lost (``WorkerLost``) and retries or fails it by the retry policy.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.tasks import Task

from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.keys import children_key, job_key
from later_django.core.records import JobError, JobRecord, decode_record
from later_django.core.retry import RetryPolicy
from later_django.engine import moves
from later_django.engine.partitions import merge_partition_changes
from later_django.engine.record_reads import read_records
from later_django.engine.registry import resolve_task
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import RecordDecodeError, UnregisteredTaskError, WorkerLost, class_path
from later_django.storage.django import DjangoStorage
from later_django.storage.partitions import HeadClaim
from later_django.storage.stores import stores_for
from later_django.storage.types import ClaimedMessage, RangeClear

logger = logging.getLogger("later_django.engine")


@dataclass
class StartedJob:
    """A job written ``running`` by this worker, ready to be called. ``sequence`` is
    the delivery message's (positive); a partition job has none and gets a negative
    number unique in the process. ``epoch`` is the partition lease it runs under."""

    record: JobRecord
    task: Task
    sequence: int
    epoch: int | None = None

    @property
    def partition(self) -> tuple[str, int] | None:
        if self.epoch is None or self.record.topic is None or self.record.partition_id is None:
            return None
        return (self.record.topic, self.record.partition_id)


@dataclass
class Outcome:
    """What running a job gave: a JSON-compatible return value, or an error."""

    started: StartedJob
    return_value: Any = None
    error: JobError | None = None


def task_retry_policy(task: Task | None) -> RetryPolicy | None:
    """The task's own retry policy (``@task(retry={...})`` on a ``LaterTask``)."""
    raw = getattr(task, "retry", None)
    if raw is None:
        return None
    return RetryPolicy.from_mapping(raw, f"the retry option of task {task.module_path}")


def start_batch(
    messages: Sequence[ClaimedMessage],
    *,
    using: str,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
) -> list[StartedJob]:
    """Writes the claimed jobs ``running`` (one transaction) and returns those to run.

    Messages that are not jobs, or whose job is gone, finished or not runnable
    now are acknowledged (or handed back, when another worker's execution lease
    is still current) in the same transaction.
    """
    now = now_ms()
    writes = JobWrites(namespace, ack_owner=worker_id, lease_owner=worker_id)
    writes.lease_started_at_ms = now
    commands: list[tuple[ClaimedMessage, ExecuteJob]] = []
    for message in messages:
        try:
            command = decode_command(message.payload)
        except RecordDecodeError as error:
            logger.error("dropping undecodable queue message %s: %s", message.sequence, error)
            writes.acks.append(message.sequence)
            continue
        if not isinstance(command, ExecuteJob):
            logger.warning("dropping queue message %s: not a job (%r)", message.sequence, command)
            writes.acks.append(message.sequence)
            continue
        commands.append((message, command))
    storage = DjangoStorage(using)
    raws = storage.get_many([job_key(namespace, command.job_id) for _, command in commands])
    records: dict[str, JobRecord] = {}
    started: list[StartedJob] = []
    for message, command in commands:
        raw = raws.get(job_key(namespace, command.job_id))
        if raw is None:
            logger.warning(
                "job %s has no record (deleted or expired); dropping its message", command.job_id
            )
            writes.acks.append(message.sequence)
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
                settings,
            )
            writes.acks.append(message.sequence)
    running_ids = [job_id for job_id, record in records.items() if record.stage == stages.RUNNING]
    leases = storage.lease_get_many(namespace, running_ids) if running_ids else {}
    lease_until = now + lease_ms
    for message, command in commands:
        record = records.get(command.job_id)
        if record is None:
            continue
        if record.stage == stages.RUNNING:
            lease = leases.get(record.job_id)
            if lease is not None and lease.owner != worker_id and lease.lease_until_ms > now:
                writes.nacks.append((message.sequence, lease.lease_until_ms - now))
                continue
            lost = _worker_lost(
                record,
                now,
                f"worker {lease.owner if lease else 'unknown'} stopped renewing the "
                f"execution lease of attempt {record.attempts}",
            )
            moves.fail_attempt(writes, record, now, lost, settings, _policy_or_none(record))
            writes.acks.append(message.sequence)
            continue
        if record.stage != stages.ENQUEUED:
            writes.acks.append(message.sequence)
            continue
        task = _resolve_or_fail(writes, record, now, worker_id, lease_until, settings)
        if task is None:
            writes.acks.append(message.sequence)
            continue
        moves.start(writes, record, now, worker_id, lease_until)
        started.append(StartedJob(record, task, message.sequence))
    if any(record.stage in stages.FINISHED for record, _ in writes.records.values()):
        writes.after_records = lambda pending, written: release_children(
            pending, written, using, settings
        )
    commit(writes, using)
    return started


def _policy_or_none(record: JobRecord) -> RetryPolicy | None:
    try:
        return task_retry_policy(resolve_task(record.task_path))
    except UnregisteredTaskError:
        return None


def finish_batch(
    outcomes: Sequence[Outcome],
    *,
    using: str,
    namespace: str,
    worker_id: str,
    settings: LaterSettings,
    lease_ms: int = 30_000,
) -> list[JobRecord]:
    """:func:`finish_and_continue` starting nothing: the records as written."""
    records, _ = finish_and_continue(
        outcomes,
        using=using,
        namespace=namespace,
        worker_id=worker_id,
        settings=settings,
        lease_ms=lease_ms,
        slots=0,
    )
    return records


class _StaleLease(Exception):
    """Raised inside a finishing transaction (rolling it back) when a partition
    fence checked after the writes finds a lease taken over."""


def finish_and_continue(
    outcomes: Sequence[Outcome],
    *,
    using: str,
    namespace: str,
    worker_id: str,
    settings: LaterSettings,
    lease_ms: int = 30_000,
    slots: int = 0,
) -> tuple[list[JobRecord], list[StartedJob]]:
    """Writes the outcomes in one transaction: success, a retry, or failure; the
    continuations of finished parents; leases released; messages acknowledged;
    for partition jobs the partition rows and heads. Returns the records as
    written, in the order of ``outcomes``, and the jobs it started: with
    ``slots`` > 0, the new runnable heads of the partitions just finished (at
    most ``slots``) are started in the same transaction, under its fence, which
    saves the worker a claim and a transaction per batch.

    Partition fence: the transaction checks, in one statement that also locks
    them, that this worker still holds the leases of the partition jobs among
    ``outcomes`` at the epochs they were started under. It is checked after the
    outcomes are written (with the read of the next heads): when a lease was
    taken over, the whole transaction rolls back and the batch is written again
    with the fence first. An outcome whose lease is lost changes nothing (it is
    logged, and its record is returned unchanged, still ``running``).
    """
    if not outcomes:
        return [], []
    options = {
        "using": using,
        "namespace": namespace,
        "worker_id": worker_id,
        "settings": settings,
        "lease_ms": lease_ms,
        "slots": slots,
    }
    if not any(outcome.started.partition is not None for outcome in outcomes):
        return _finish_once(outcomes, fence_first=False, **options)
    try:
        return _finish_once(outcomes, fence_first=False, **options)
    except _StaleLease:
        return _finish_once(outcomes, fence_first=True, **options)


def _finish_once(
    outcomes: Sequence[Outcome],
    *,
    fence_first: bool,
    using: str,
    namespace: str,
    worker_id: str,
    settings: LaterSettings,
    lease_ms: int,
    slots: int,
) -> tuple[list[JobRecord], list[StartedJob]]:
    finished: list[JobRecord] = []
    started: list[StartedJob] = []
    now = now_ms()
    writes = JobWrites(namespace, ack_owner=worker_id, lease_owner=worker_id)
    fenced = [outcome.started for outcome in outcomes if outcome.started.partition is not None]
    held = {(*job.partition, job.epoch) for job in fenced if job.partition and job.epoch}
    with transaction.atomic(using=using, savepoint=False) if fenced else nullcontext():
        if fence_first:
            kept = _fence(fenced, using, namespace, worker_id, now + lease_ms)
        else:
            kept = {job.partition for job in fenced if job.partition is not None}
        for outcome in outcomes:
            partition = outcome.started.partition
            if partition is not None and partition not in kept:
                logger.warning(
                    "job %s: the lease of topic %r partition %d (epoch %d) was taken over; "
                    "its outcome is discarded (the new owner retries the attempt)",
                    outcome.started.record.job_id,
                    partition[0],
                    partition[1],
                    outcome.started.epoch,
                )
                finished.append(outcome.started.record)
                continue
            # A copy: when the write fails, the worker retries with the records unmoved.
            record = outcome.started.record.clone()
            finished.append(record)
            if partition is None:
                writes.acks.append(outcome.started.sequence)
            writes.leases_released.append(record.job_id)
            if outcome.error is None:
                moves.succeed(writes, record, now, outcome.return_value, settings)
            else:
                moves.fail_attempt(
                    writes,
                    record,
                    now,
                    outcome.error,
                    settings,
                    task_retry_policy(outcome.started.task),
                )
        writes.after_records = lambda pending, written: release_children(
            pending, written, using, settings
        )
        chain = slots > 0 and bool(kept)
        # Chaining: the heads move once, at the end, after the next jobs started.
        writes.defer_partition_changes = chain or (bool(fenced) and not fence_first)
        commit(writes, using)
        store = stores_for(using).partitions
        following: list[tuple[HeadClaim, int]] = []
        if fence_first:
            if chain:
                following = store.next_rows(namespace, sorted(kept), writes.partition_exits, now)
        else:
            confirmed, following = store.fence_and_next(
                namespace, worker_id, held, now_ms() + lease_ms, writes.partition_exits, now
            )
            if confirmed != kept:
                raise _StaleLease(sorted(kept - confirmed))
        if writes.defer_partition_changes:
            epochs = {job.partition: job.epoch for job in fenced if job.partition in kept}
            started = _start_next(
                writes,
                following if chain else [],
                epochs,
                slots,
                using,
                namespace,
                worker_id,
                lease_ms,
                settings,
            )
    return finished, started


def _start_next(
    finished: JobWrites,
    rows: list[tuple[HeadClaim, int]],
    epochs: dict[tuple[str, int], int | None],
    slots: int,
    using: str,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
) -> list[StartedJob]:
    """Starts, in the finishing transaction, the ``rows`` that become the heads of
    the partitions just finished (those runnable now, at most ``slots``), then
    writes ``finished``'s deferred partition changes with the starts' own: the
    heads move once, after every counter-moving write of the transaction."""
    now = now_ms()
    claims = []
    for claim, earliest in rows:
        due = finished.partition_run_at.get(claim.job_id, earliest) <= now
        runnable = claim.stage == stages.ENQUEUED or (
            claim.stage in (stages.DELAYED, stages.REQUEUED) and due
        )
        if runnable and len(claims) < slots:
            claims.append(dataclasses.replace(claim, epoch=epochs[claim.partition]))
    return _start_claimed(
        claims,
        using=using,
        namespace=namespace,
        worker_id=worker_id,
        lease_ms=lease_ms,
        settings=settings,
        carried=finished,
    )


def _fence(
    started: Sequence[StartedJob], using: str, namespace: str, worker_id: str, until_ms: int
) -> set[tuple[str, int]]:
    """The partitions of ``started`` whose lease this worker still holds at the
    epoch they were started under (their leases extended to ``until_ms``)."""
    if not started:
        return set()
    held = {
        (job.record.topic, job.record.partition_id, job.epoch)
        for job in started
        if job.record.topic is not None
        and job.record.partition_id is not None
        and job.epoch is not None
    }
    return stores_for(using).partitions.fence(namespace, worker_id, held, until_ms)


_synthetic_sequences = itertools.count(1)


def start_heads(
    claims: Sequence[HeadClaim],
    *,
    using: str,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
) -> list[StartedJob]:
    """Starts the claimed partition heads in one transaction and returns those to run.

    The transaction opens with the partition fence (owner and epoch of each
    claim). Then, per head: ``enqueued`` starts; ``delayed`` or ``requeued`` (due)
    becomes ``enqueued`` and starts; ``running`` is an attempt of the partition's
    previous owner, lost with its lease: it fails as ``WorkerLost`` and is
    retried (or failed) by the retry policy, to be claimed again. A head whose
    record is gone or undecodable leaves its partition (failed when undecodable).
    """
    if not claims:
        return []
    with transaction.atomic(using=using, savepoint=False):
        kept = stores_for(using).partitions.fence(
            namespace,
            worker_id,
            {(claim.topic, claim.partition_id, claim.epoch) for claim in claims},
            now_ms() + lease_ms,
        )
        return _start_claimed(
            [claim for claim in claims if claim.partition in kept],
            using=using,
            namespace=namespace,
            worker_id=worker_id,
            lease_ms=lease_ms,
            settings=settings,
        )


def _start_claimed(
    claims: Sequence[HeadClaim],
    *,
    using: str,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
    carried: JobWrites | None = None,
) -> list[StartedJob]:
    """The body of :func:`start_heads` for heads of fenced partitions; call inside
    the fencing transaction. ``carried``: deferred partition changes of the same
    transaction, written with these."""
    now = now_ms()
    lease_until = now + lease_ms
    writes = JobWrites(namespace, lease_owner=worker_id)
    writes.lease_started_at_ms = now
    if carried is not None:
        merge_partition_changes(writes, carried)
    started: list[StartedJob] = []
    for claim in claims:
        raw = claim.record
        if raw is None:
            logger.warning(
                "partition head %s has no record (deleted or expired); it leaves %r/%d",
                claim.job_id,
                claim.topic,
                claim.partition_id,
            )
            writes.partition_exits.append(claim.job_id)
            writes.partitions_touched.add(claim.partition)
            continue
        try:
            record = decode_record(raw)
        except RecordDecodeError as error:
            logger.error("job %s: %s; marking it failed", claim.job_id, error)
            moves.replace_undecodable(
                writes, namespace, claim.job_id, "", raw, str(error), now, settings
            )
            writes.partition_exits.append(claim.job_id)
            writes.partitions_touched.add(claim.partition)
            continue
        job = _start_head(writes, record, claim, now, worker_id, lease_until, settings)
        if job is not None:
            started.append(job)
    if any(record.stage in stages.FINISHED for record, _ in writes.records.values()):
        writes.after_records = lambda pending, written: release_children(
            pending, written, using, settings
        )
    commit(writes, using)
    return started


def _start_head(
    writes: JobWrites,
    record: JobRecord,
    claim: HeadClaim,
    now: int,
    worker_id: str,
    lease_until: int,
    settings: LaterSettings,
) -> StartedJob | None:
    """One head's moves (see :func:`start_heads`); the job to run, or None."""
    if record.stage == stages.RUNNING:
        previous = record.worker_ids[-1] if record.worker_ids else "unknown"
        lost = _worker_lost(
            record,
            now,
            f"worker {previous} lost the lease of topic {claim.topic!r} partition "
            f"{claim.partition_id} while running attempt {record.attempts}",
        )
        moves.fail_attempt(writes, record, now, lost, settings, _policy_or_none(record))
        return None
    if record.stage in (stages.DELAYED, stages.REQUEUED):
        moves.make_ready(writes, record, now)
    if record.stage != stages.ENQUEUED:
        # Waiting (or already finished): the head is not runnable; recompute it.
        writes.partitions_touched.add(claim.partition)
        return None
    task = _resolve_or_fail(writes, record, now, worker_id, lease_until, settings)
    if task is None:
        return None
    moves.start(writes, record, now, worker_id, lease_until)
    return StartedJob(record, task, -next(_synthetic_sequences), epoch=claim.epoch)


def release_children(
    writes: JobWrites, written: list[JobRecord], using: str, settings: LaterSettings
) -> None:
    """Moves the continuations of every finished job in ``written``, adding to ``writes``.

    Runs inside the finishing transaction after the parents' records were
    written, so a ``continue_with`` racing with the finish either committed
    its child first (and the child is seen here) or waits for this commit and
    then sees a finished parent. A child of a failed parent that runs only on
    success fails too, and so, in turn, do its own such children.
    """
    now = now_ms()
    namespace = writes.namespace
    storage = DjangoStorage(using)
    parents = [record for record in written if record.stage in stages.FINISHED]
    seen: set[str] = set()
    while parents:
        parents = [parent for parent in parents if parent.job_id not in seen]
        seen.update(parent.job_id for parent in parents)
        ranges = storage.range_members_many(
            [children_key(namespace, parent.job_id) for parent in parents]
        )
        if not ranges:
            return
        parent_of_range = {children_key(namespace, parent.job_id): parent for parent in parents}
        parent_of_child = {
            member.decode(): parent_of_range[key]
            for key, members in ranges.items()
            for member in members
        }
        children = read_records(storage, namespace, sorted(parent_of_child))
        writes.other_operations += [RangeClear(key) for key in sorted(ranges)]
        newly_finished: list[JobRecord] = []
        for child_id, child in sorted(children.items()):
            if child.stage != stages.WAITING:
                continue
            parent = parent_of_child[child_id]
            if parent.stage == stages.FAILED and child.run_on == "success":
                moves.fail_waiting(writes, child, now, f"parent {parent.job_id} failed", settings)
                newly_finished.append(child)
            else:
                moves.make_ready(writes, child, now)
        parents = newly_finished


def _resolve_or_fail(
    writes: JobWrites,
    record: JobRecord,
    now: int,
    worker_id: str,
    lease_until: int,
    settings: LaterSettings,
) -> Task | None:
    """The record's registered task, or None after writing the job ``failed``
    (no retries: an unregistered task path will not become registered by waiting)."""
    try:
        return resolve_task(record.task_path)
    except UnregisteredTaskError as error:
        logger.error("job %s: %s; marking it failed", record.job_id, error)
        moves.start(writes, record, now, worker_id, lease_until)
        moves.fail_attempt(
            writes,
            record,
            now,
            JobError(
                class_path(UnregisteredTaskError),
                str(error),
                now,
                record.attempts,
            ),
            settings,
            retryable=False,
        )
        writes.leases_acquired.pop()
        return None


def _worker_lost(record: JobRecord, now: int, why: str) -> JobError:
    """The error recorded for an attempt whose worker stopped holding its lease."""
    return JobError(
        exception_class_path=class_path(WorkerLost),
        traceback=why,
        at_ms=now,
        attempt=record.attempts,
    )
