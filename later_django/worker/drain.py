"""After the loop: let running jobs finish, write their outcomes, hand back the rest.

Bounded by the shutdown timeout (``--shutdown-timeout``, or the orphan's
shorter grace): until then it hands back unstarted messages and writes each
outcome as it completes. What completed by the deadline is written (retried
through database errors); the messages of jobs still running are handed back
and their leases lapsed (:meth:`~later_django.worker.handback.HandBack.still_running`).
No job starts: the finish starts no next heads once stopping.
"""

from __future__ import annotations

import time

from django.db import Error as DatabaseError

from later_django.worker.handback import HandBack
from later_django.worker.jobs import RunningJobs
from later_django.worker.loop import JobLoop
from later_django.worker.process import Backoff, ProcessControl

#: How often draining looks for completed outcomes at most.
DRAIN_LOOK_SECONDS = 0.05


def drain(process: ProcessControl, jobs: RunningJobs, loop: JobLoop, hand_back: HandBack) -> None:
    """Returns once nothing is in flight or the shutdown timeout passed (see the module)."""
    deadline = time.monotonic() + process.shutdown_seconds()
    backoff = Backoff()
    while (jobs.in_flight or hand_back.pending) and time.monotonic() < deadline:
        try:
            hand_back.flush()
            loop.finish_completed()
        except DatabaseError as error:
            process.database_trouble(error, backoff)
            continue
        if jobs.in_flight:
            process.wake.wait(min(DRAIN_LOOK_SECONDS, max(0.0, deadline - time.monotonic())))
            process.wake.clear()
    if jobs.completed:
        process.with_retries(loop.finish_completed)
    if jobs.in_flight:
        hand_back.still_running(*jobs.held())
