"""Lost attempts: failing now, by the finish path, the attempts a worker gives up.

:func:`record_lost_attempts` writes ``WorkerLost`` (or ``TaskTimeout``) for attempts
whose execution lease the worker still holds: those past their deadline, or those
it gives up at a second stop signal, instead of leaving them to the lease's lapse. (The
error a later claimer records for an attempt whose worker vanished is
:func:`~later_django.engine.execution.values.worker_lost`.)
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.records import JobRecord
from later_django.engine.execution.finish import fence_then_finish
from later_django.engine.execution.values import Outcome, StartedJob, WorkerArgs, attempt_error
from later_django.exceptions import WorkerLost
from later_django.storage.stores import Stores


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
    worker = WorkerArgs(stores, namespace, worker_id, 0, settings)
    now = now_ms()
    job_ids = [job.record.job_id for job in started]
    with transaction.atomic(using=stores.using, savepoint=False):
        held = set(stores.executions.lease_renew(namespace, worker_id, job_ids, now))
        outcomes = [
            Outcome(
                job,
                error=attempt_error(error_class, job.record, now, why),
                seconds=_seconds_since_attempt(job.record, now),
            )
            for job in started
            if job.record.job_id in held
        ]
        if not outcomes:
            return []
        records, _ = fence_then_finish(outcomes, worker, slots=0)
    return [record for record in records if record.stage != stages.RUNNING]


def _seconds_since_attempt(record: JobRecord, now: int) -> float:
    """How long the attempt of ``record`` has run at ``now`` (from its start as written)."""
    return max(0, now - (record.last_attempted_at_ms or now)) / 1000
