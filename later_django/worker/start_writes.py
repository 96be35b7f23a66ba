"""A planned batch's launch and start write, in the order the database favours
(decision 112).

Where writers do not queue for one lock (PostgreSQL), the main thread hands the
batch's jobs to their threads first, then writes the batch's start (records
``running``, attempts, index rows, execution leases): that round trip is no longer
part of a job's start latency. A job lost before the write commits is not lost for
counting: its message's next claim sees a second delivery of a job still
``enqueued`` and records the attempt. When that write fails (the database went
away), the batch waits here and is written again, fenced by the batch's claims,
before any outcome is written (:meth:`StartWrites.flush`, called first by every
finish): a job's start always commits before its outcome.

Where one writer at a time holds the database's write lock (SQLite), the start
commits first and the jobs go to their threads after: job threads woken during the
write compete with it for the interpreter and keep the lock held longer (the drain
measured 7 - 8 % slower). A failed start write then hands the batch back unstarted.
Main thread only.
"""

from __future__ import annotations

import logging
import time

from django.db import Error as DatabaseError

from later_django.engine.execution.start import BatchStart
from later_django.worker.handback import HandBack
from later_django.worker.jobs import RunningJobs

logger = logging.getLogger("later_django.worker")


class StartWrites:
    """Launches planned batches and writes their starts; ``pending`` holds the batches
    launched whose start write has not committed yet, in order."""

    def __init__(self, jobs: RunningJobs, hand_back: HandBack, *, launch_first: bool) -> None:
        self.jobs = jobs
        self.hand_back = hand_back
        #: The jobs go to their threads before their start write (see the module).
        self.launch_first = launch_first
        self.pending: list[BatchStart] = []

    def start(self, start: BatchStart) -> None:
        """Launches ``start``'s jobs and writes the batch's start, in this process's
        order; raises the database error of a failed write, after keeping the batch
        for :meth:`flush` (launched first) or handing it back unstarted."""
        if self.launch_first:
            self._launch(start)
            try:
                start.commit()
            except DatabaseError:
                self.pending.append(start)
                raise
            return
        try:
            start.commit()
        except DatabaseError:
            self.hand_back.unstarted([message.sequence for message in start.messages])
            raise
        self._launch(start)

    def _launch(self, start: BatchStart) -> None:
        self.jobs.launch(start.started)
        if start.started:
            # The GIL to the job threads just woken: else the first waits until
            # this thread's next I/O or the interpreter's 5 ms switch interval.
            time.sleep(0)

    def flush(self) -> None:
        """Writes the pending batches, oldest first (see
        :meth:`~later_django.engine.execution.start.BatchStart.commit_again`): jobs the new
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
