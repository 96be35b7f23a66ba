"""After the loop: let running jobs finish, write their outcomes, hand back the rest.

Bounded by the shutdown timeout (``--shutdown-timeout``, or the orphan's
shorter grace): until then it hands back unstarted messages and writes each
outcome as it completes. What completed by the deadline is written (retried
through database errors); the messages of jobs still running are handed back
and their leases lapsed (:meth:`~later_django.worker.handback.HandBack.still_running`).
No job starts: the finish starts no next heads once stopping. Cancel requests still
reach the running jobs, and their deadlines are still watched.

A second stop signal ends the drain at its next turn (:func:`exit_at_once`): the
main thread is then between two of its own statements, so the hand-back, on the
main thread's connection, interrupts nothing half-written.
"""

from __future__ import annotations

import logging
import time
from typing import NoReturn

from django.db import Error as DatabaseError

from later_django.worker.handback import HandBack
from later_django.worker.jobs import RunningJobs
from later_django.worker.loop import JobLoop
from later_django.worker.process import STATEMENT_ERRORS, Backoff, ProcessControl

logger = logging.getLogger("later_django.worker")

#: How often draining looks for completed outcomes at most.
DRAIN_LOOK_SECONDS = 0.05


def drain(process: ProcessControl, jobs: RunningJobs, loop: JobLoop, hand_back: HandBack) -> None:
    """Returns once nothing is in flight or the shutdown timeout passed (see the module);
    a second stop signal exits the process instead (:func:`exit_at_once`)."""
    deadline = time.monotonic() + process.shutdown_seconds()
    backoff = Backoff()
    while (jobs.in_flight or hand_back.pending) and time.monotonic() < deadline:
        if process.exiting.is_set():
            exit_at_once(process, jobs, loop, hand_back)
        process.alive()
        try:
            hand_back.flush()
            loop.cancels.poll()
            loop.deadlines.check()
            loop.finish_completed()
        except STATEMENT_ERRORS as error:
            process.database_trouble(error, backoff)
            continue
        backoff.reset()
        if jobs.in_flight:
            process.wake.wait(min(DRAIN_LOOK_SECONDS, max(0.0, deadline - time.monotonic())))
            process.wake.clear()
    if process.exiting.is_set():
        exit_at_once(process, jobs, loop, hand_back)
    if jobs.completed:
        process.with_retries(loop.finish_completed)
    if jobs.in_flight:
        hand_back.still_running(*jobs.held())


def exit_at_once(
    process: ProcessControl, jobs: RunningJobs, loop: JobLoop, hand_back: HandBack
) -> NoReturn:
    """The second stop signal: one attempt each (no retries; the process watchdog
    exits anyway at HAND_BACK_SECONDS) to write the outcomes already completed,
    hand back unstarted messages and the jobs still running (``WorkerLost`` now,
    :meth:`HandBack.lost`), give up the partition leases and remove the worker row;
    then exit 1."""
    logger.warning(
        "second signal: exiting at once, handing back %d running job(s)",
        len(jobs.in_flight) - len(jobs.completed),
    )
    try:
        # Known outcomes are written, not re-run.
        loop.finish_completed()
    except DatabaseError:
        logger.warning("could not write completed outcomes; their leases will lapse")
    try:
        hand_back.flush()
        hand_back.lost(list(jobs.in_flight.values()))
        loop.heads.release_all()
        hand_back.leave()
    except DatabaseError:
        logger.warning("could not hand back running jobs; their leases will lapse", exc_info=True)
    process.exit_now(1)
