"""Starting jobs from topic partition heads, under the partition fence.

Jobs on topic partitions come from heads (:func:`start_heads`), not messages.
Every transaction that starts one is fenced: one statement extends the worker's
partition leases whose owner *and* epoch still match the claim. A job whose
partition lease was taken over (a higher epoch) is left untouched and logged; its
new owner treats the running attempt as lost (``WorkerLost``) and retries or fails
it by the retry policy. :func:`start_claims` starts heads inside a transaction
that is fenced already (the finish's, for the next heads).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import transaction

from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.records import decode_record
from later_django.engine import cancellation, moves
from later_django.engine.cancellation import Requests
from later_django.engine.execution.start import cancel_requested, commit_starts, task_or_refuse
from later_django.engine.execution.values import (
    HeldPartition,
    StartedJob,
    WorkerArgs,
    attempt_deadline,
    policy_or_none,
    worker_lost,
)
from later_django.engine.partition_changes import PartitionChanges
from later_django.engine.writes import JobWrites
from later_django.exceptions import RecordDecodeError
from later_django.storage.partitions import HeadClaim
from later_django.storage.stores import Stores

logger = logging.getLogger("later_django.engine")


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
    worker = WorkerArgs(stores, namespace, worker_id, lease_ms, settings, cancels)
    with transaction.atomic(using=stores.using, savepoint=False):
        kept = stores.partitions.fence(
            namespace,
            worker_id,
            {(claim.topic, claim.partition_id, claim.epoch) for claim in claims},
            now_ms() + lease_ms,
        )
        return start_claims([claim for claim in claims if claim.partition in kept], worker)


def start_claims(
    claims: Sequence[HeadClaim], worker: WorkerArgs, carried: PartitionChanges | None = None
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
    commit_starts(writes, worker)
    return started


def _start_claim(
    writes: JobWrites, claim: HeadClaim, now: int, worker: WorkerArgs
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
        cancel_requested(writes, record, now, worker)
        return None
    if record.stage == stages.RUNNING:
        previous = record.worker_ids[-1] if record.worker_ids else "unknown"
        lost = worker_lost(
            record,
            now,
            f"worker {previous} lost the lease of topic {claim.topic!r} partition "
            f"{claim.partition_id} while running attempt {record.attempts}",
        )
        policy = policy_or_none(record, worker.settings)
        moves.fail_attempt(writes, record, now, lost, worker.settings, policy)
        writes.count_attempt(record, None)
        return None
    if record.stage in (stages.DELAYED, stages.REQUEUED):
        moves.make_ready(writes, record, now)
    if record.stage != stages.ENQUEUED:
        # Waiting (or already finished): the head is not runnable; recompute it.
        writes.partitions.touch(claim.partition)
        return None
    task = task_or_refuse(writes, record, now, worker)
    if task is None:
        return None
    moves.start(writes, record, now, worker.worker_id, now + worker.lease_ms)
    held = HeldPartition(claim.topic, claim.partition_id, claim.epoch)
    deadline = attempt_deadline(task, now, worker.settings)
    return StartedJob(record, task, held=held, deadline_ms=deadline, stores=worker.stores)
