"""Finishing jobs and continuing: the worker's finish write of a batch's outcomes.

:func:`finish_and_continue` writes the outcomes of finished jobs in one
transaction: acknowledgements, records, continuations of finished parents,
index rows, released leases, the delivery of retries and continuations, and
for partition jobs the next heads, which it may start at once
(:func:`~later_django.engine.execution.heads.start_claims`). A transaction that
finishes a partition job is fenced by owner and epoch: fence last in the usual
case (:func:`_finish_then_fence`), fence first after a lease was found taken over
(:func:`fence_then_finish`, which the lost attempts' write uses too).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from django.db import transaction

from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.records import JobRecord
from later_django.core.retry import lineage
from later_django.engine import cancellation, moves, parent_holds
from later_django.engine.cancellation import Requests
from later_django.engine.continuations import (
    children_ranges,
    commit_releasing_children,
    release_children,
)
from later_django.engine.execution.heads import start_claims
from later_django.engine.execution.values import (
    HeldPartition,
    Outcome,
    StartedJob,
    WorkerArgs,
    task_retry_policy,
)
from later_django.engine.writes import JobWrites, commit, write_tables
from later_django.exceptions import JobCancelled, class_path
from later_django.storage.partitions import Fenced, HeadClaim, Partition
from later_django.storage.stores import Stores

logger = logging.getLogger("later_django.engine")


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
    worker = WorkerArgs(stores, namespace, worker_id, lease_ms, settings, cancels)
    if not any(outcome.started.held is not None for outcome in outcomes):
        return _finish_queue_jobs(outcomes, worker), []
    written = _finish_then_fence(outcomes, worker, slots)
    if written is None:
        written = fence_then_finish(outcomes, worker, slots)
    return written


def _finish_queue_jobs(outcomes: Sequence[Outcome], worker: WorkerArgs) -> list[JobRecord]:
    """Outcomes of jobs from delivery messages only: no fence, no partition."""
    writes = JobWrites(worker.namespace, owner=worker.worker_id)
    records = _write_outcomes(writes, outcomes, set(), now_ms(), worker.settings)
    commit_releasing_children(writes, worker.stores, worker.settings)
    return records


def _finish_then_fence(
    outcomes: Sequence[Outcome], worker: WorkerArgs, slots: int
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
        else:
            finished = [record for record in parents if record.stage in stages.FINISHED]
            parent_holds.release(writes, finished, stores)
        started = _continue_partitions(writes, following, held, slots, worker)
    return records, started


def _release_fenced_children(
    writes: JobWrites, parents: list[JobRecord], fenced: Fenced, worker: WorkerArgs, now: int
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


def fence_then_finish(
    outcomes: Sequence[Outcome], worker: WorkerArgs, slots: int
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
            policy = task_retry_policy(started.task, settings)
            raised = None if outcome.exception is None else lineage(type(outcome.exception))
            moves.fail_attempt(
                writes,
                record,
                now,
                outcome.error,
                settings,
                policy,
                retryable=outcome.retryable,
                raised=raised,
            )
        writes.count_attempt(record, outcome.seconds * 1000)
    return records


_CANCELLED_PATH = class_path(JobCancelled)


def _raised_cancel(outcome: Outcome) -> bool:
    return outcome.error is not None and outcome.error.exception_class_path == _CANCELLED_PATH


def _write_with_children(writes: JobWrites, worker: WorkerArgs) -> None:
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
    worker: WorkerArgs,
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
    return start_claims(claims, worker, carried)
