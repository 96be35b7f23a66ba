"""The start writes of batches whose jobs already run (decision 112).

The main thread hands a planned batch's jobs to their threads, then writes the
batch's start (records ``running``, attempts, index rows, execution leases): that
round trip is no longer part of a job's start latency. A job lost before the write
commits is not lost for counting: its message's next claim sees a second delivery
on a job still ``enqueued`` and records the attempt.

When the write fails (the database went away), the batch waits here and is
written again, fenced by the batch's claims, before any outcome is written
(:meth:`StartWrites.flush`, called first by every finish): a job's start always
commits before its outcome. Main thread only.
"""

from __future__ import annotations

import logging

from django.db import Error as DatabaseError

from later_django.engine.execution import BatchStart
from later_django.worker.jobs import RunningJobs

logger = logging.getLogger("later_django.worker")


class StartWrites:
    """Batches launched whose start write has not committed yet (``pending``, in order)."""

    def __init__(self, jobs: RunningJobs) -> None:
        self.jobs = jobs
        self.pending: list[BatchStart] = []

    def commit(self, start: BatchStart) -> None:
        """Writes ``start`` (its jobs already launched); when the database fails, keeps
        it for :meth:`flush` and raises the error."""
        try:
            start.commit()
        except DatabaseError:
            self.pending.append(start)
            raise

    def flush(self) -> None:
        """Writes the pending batches, oldest first (see
        :meth:`~later_django.engine.execution.BatchStart.commit_again`): jobs the new
        plan starts that were not launched are launched; jobs it does not start, or
        all of a batch whose claims were lost, are abandoned (their outcomes dropped).
        Raises the database error, keeping the batches not written."""
        while self.pending:
            start = self.pending[0]
            launch, abandon = start.commit_again()
            self.pending.pop(0)
            logger.warning(
                "wrote a batch's start once the database answered (%d job(s) running)",
                len(start.started) - len(abandon),
            )
            if abandon:
                logger.warning(
                    "gave up %d running job(s) whose start could not be written under "
                    "their claims; their outcomes are dropped and they will run again",
                    len(abandon),
                )
                self.jobs.abandon(abandon)
            self.jobs.launch(launch)
