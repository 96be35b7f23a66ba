"""Job timeouts: an attempt still running past its deadline is failed, and the
process that runs it replaced.

A job's deadline is its start plus its task's ``timeout`` (or ``LATER["TIMEOUT"]``,
:func:`~later_django.engine.execution.values.task_timeout_ms`). Each turn of the loop (at
least every half second while jobs run) and of the drain, :meth:`Deadlines.check`
gives up the jobs past it (:meth:`~later_django.worker.jobs.RunningJobs.abandon_past_deadline`:
their outcome, should it come, is dropped) and records their attempts failed by
``TaskTimeout`` through the fenced path a second stop signal uses
(:func:`~later_django.engine.execution.lost.record_lost_attempts`): the message is
acknowledged, the lease released, the retry policy decides. A Python thread
cannot be stopped, so the process then stops claiming, lets its other jobs finish
(up to the shutdown timeout) and exits to be replaced
(:data:`~later_django.worker.process.EXIT_REPLACE`). Stuck code so runs for at
most its timeout plus the shutdown timeout, and no other job is lost or run twice.
"""

from __future__ import annotations

import logging

from later_django.core.clock import now_ms
from later_django.core.log_context import job_fields
from later_django.engine.execution.lost import record_lost_attempts
from later_django.engine.execution.values import StartedJob
from later_django.exceptions import TaskTimeout
from later_django.worker.jobs import RunningJobs
from later_django.worker.options import WorkerContext
from later_django.worker.process import ProcessControl

logger = logging.getLogger("later_django.worker")


class Deadlines:
    """Watches the deadlines of the jobs running here (main thread only)."""

    def __init__(self, context: WorkerContext, jobs: RunningJobs, process: ProcessControl) -> None:
        self.context = context
        self.jobs = jobs
        self.process = process
        #: Jobs given up whose failure is not written yet (a write failed): tried again.
        self._unrecorded: list[StartedJob] = []

    def check(self) -> None:
        """Gives up the jobs past their deadline and records each failed by
        ``TaskTimeout`` (one transaction per job: timeouts are rare); then asks for
        the process to be replaced. A database error propagates (to the loop's
        back-off) and the jobs not yet written are written at the next check (a
        second write of one changes nothing: the lease fences it)."""
        now = now_ms()
        given_up = self.jobs.abandon_past_deadline(now)
        if given_up:
            self.context.telemetry.timed_out(given_up, [_ran_seconds(job, now) for job in given_up])
        for job in given_up:
            logger.error(
                "job %s (task %s): %s; recording it failed by TaskTimeout",
                job.record.job_id,
                job.record.task_path,
                _why(job),
                extra=job_fields(job.record, _ran_seconds(job, now)),
            )
            self._unrecorded.append(job)
        if not self._unrecorded:
            return
        self.process.replace("a job ran past its timeout")
        context = self.context
        while self._unrecorded:
            job = self._unrecorded[0]
            record_lost_attempts(
                [job],
                stores=context.stores,
                namespace=context.namespace,
                worker_id=context.worker_id,
                settings=context.settings,
                why=_why(job),
                error_class=TaskTimeout,
            )
            self._unrecorded.pop(0)


def _ran_seconds(job: StartedJob, now: int) -> float:
    return max(now - (job.record.last_attempted_at_ms or now), 0) / 1000


def _why(job: StartedJob) -> str:
    started = job.record.last_attempted_at_ms or 0
    seconds = ((job.deadline_ms or started) - started) / 1000
    return f"attempt {job.record.attempts} ran past its timeout of {seconds:g}s"
