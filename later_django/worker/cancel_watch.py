"""A worker's side of cancelling: it reads the cancel requests and carries them out.

Every :data:`~later_django.engine.cancellation.POLL_SECONDS` at most (checked each
turn of the loop, which wakes at least that often while jobs run), the watch reads
the namespace's requests (:func:`~later_django.engine.cancellation.read_requests`)
and:

* sets the cancel flag of each requested job running here (the task sees
  ``context.cancelled``; its outcome is written cancelled);
* cancels the requested jobs waiting on partitions this worker holds, under the
  partition fence (:func:`~later_django.engine.cancellation.cancel_on_partitions`);
* keeps the requests for the loop's starts: a requested job is written cancelled
  instead of started.

Main thread only. A database error of a read propagates to the loop's back-off;
the last requests read stay in use meanwhile.
"""

from __future__ import annotations

import logging
import time

from later_django.core.log_context import job_fields
from later_django.engine import cancellation
from later_django.engine.cancellation import Requests
from later_django.worker.heads import HeadClaims
from later_django.worker.jobs import RunningJobs
from later_django.worker.options import WorkerContext

logger = logging.getLogger("later_django.worker")


class CancelWatch:
    """The cancel requests this worker last read (:attr:`requests`), refreshed by
    :meth:`poll`."""

    def __init__(
        self,
        context: WorkerContext,
        jobs: RunningJobs,
        heads: HeadClaims,
        *,
        poll_seconds: float = cancellation.POLL_SECONDS,
    ) -> None:
        self.context = context
        self.jobs = jobs
        self.heads = heads
        self.poll_seconds = poll_seconds
        self.requests: Requests = cancellation.NONE
        self._read_at: float | None = None

    def poll(self) -> None:
        """Reads the requests when the last read is older than ``poll_seconds``, then
        flags the jobs running here and cancels those waiting on held partitions."""
        now = time.monotonic()
        if self._read_at is not None and now - self._read_at < self.poll_seconds:
            return
        context = self.context
        self.requests = cancellation.read_requests(context.stores, context.namespace)
        self._read_at = now
        if not self.requests.jobs:
            return
        running = self.jobs.running_job_ids()
        if self.requests.complete:
            requested = {job_id for job_id in running if job_id in self.requests}
        else:
            requested = cancellation.requested_among(context.stores, context.namespace, running)
        for job in self.jobs.flag_cancelled(requested):
            logger.info(
                "job %s: cancel requested; its task is asked to stop",
                job.record.job_id,
                extra=job_fields(job.record),
            )
        self._cancel_on_partitions(set(running))

    def _cancel_on_partitions(self, running: set[str]) -> None:
        held = self.heads.partitions.held
        waiting = [
            job_id
            for job_id, partition in self.requests.jobs.items()
            if partition is not None and partition in held and job_id not in running
        ]
        if not waiting:
            return
        partitions = {self.requests.jobs[job_id] for job_id in waiting}
        context = self.context
        cancelled = cancellation.cancel_on_partitions(
            waiting,
            {partition: held[partition] for partition in partitions if partition is not None},
            stores=context.stores,
            namespace=context.namespace,
            worker_id=context.worker_id,
            lease_ms=context.lease_ms,
            settings=context.settings,
        )
        if cancelled:
            self.heads.look_again()
