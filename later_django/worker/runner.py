"""One worker process: :class:`Worker` composes the actors and runs their life cycle.

* :mod:`~later_django.worker.loop` - the main thread's claim → start → run → finish cycle;
* :mod:`~later_django.worker.heads` - claims of partition heads
  (:mod:`~later_django.worker.partitions`: which partitions are held);
* :mod:`~later_django.worker.jobs` - the jobs held, the job threads
  (:mod:`~later_django.worker.task_calls`: the task call and Django's signals);
* :mod:`~later_django.worker.scheduler` - maintenance passes and the metrics flush;
* :mod:`~later_django.worker.process` - stop signals, orphan detection, back-off;
* :mod:`~later_django.worker.handback` and :mod:`~later_django.worker.drain` - giving
  claimed work back, and the graceful stop;
* :mod:`~later_django.worker.heartbeat` and :mod:`~later_django.worker.wakeup` - the
  helper threads: lease renewal, and how an idle process learns of new work.

Faults: a job's exception is its own failure; a database error (server
restarted, SQLite busy past its timeout) is logged and retried with back-off,
keeping what completed until it can be written; one that retrying cannot cure (a value
the database refuses, a statement it cannot run) stops the worker once its running
jobs have finished, with :data:`~later_django.worker.process.EXIT_NOT_TRANSIENT`;
the first SIGTERM/SIGINT stops claiming and lets running jobs finish (up to the
shutdown timeout, after which their messages and leases are handed back), the
second exits at once, handing the running jobs back as lost (``WorkerLost``) so
they are retried without waiting for their leases (:func:`~later_django.worker.drain.exit_at_once`).
"""

from __future__ import annotations

import logging
import os
import socket

from django.db import Error as DatabaseError

from later_django.core.clock import now_ms
from later_django.engine.execution.values import StartedJob
from later_django.engine.recurring_settings import sync_configured_recurring
from later_django.engine.topics import register_configured_topics
from later_django.storage.types import WorkerRow
from later_django.worker.bell import Bell
from later_django.worker.drain import drain
from later_django.worker.handback import HandBack
from later_django.worker.heads import HeadClaims
from later_django.worker.heartbeat import Heartbeat
from later_django.worker.jobs import RunningJobs
from later_django.worker.limited_claims import LimitedClaims
from later_django.worker.loop import JobLoop
from later_django.worker.options import WorkerContext, WorkerOptions
from later_django.worker.process import (
    EXIT_DATABASE_AWAY,
    EXIT_NOT_TRANSIENT,
    EXIT_REPLACE,
    DatabaseAway,
    NotTransient,
    ProcessControl,
)
from later_django.worker.scheduler import Scheduler
from later_django.worker.telemetry import NO_TELEMETRY, Telemetry
from later_django.worker.wakeup import NotificationListener, start_wakeup

#: How long the exit waits for a heartbeat in flight before removing the row.
HEARTBEAT_RETIRE_SECONDS = 5.0

__all__ = ["Worker", "WorkerOptions"]

logger = logging.getLogger("later_django.worker")


class Worker:
    """Runs jobs of ``options.queues`` until stopped; :meth:`run` returns the exit code.

    Building one touches no database; :meth:`run` is called once."""

    def __init__(self, options: WorkerOptions, telemetry: Telemetry = NO_TELEMETRY) -> None:
        self.context = WorkerContext.create(options, telemetry)
        self.process = ProcessControl(options, self.context.using, telemetry)
        self.jobs = RunningJobs(options.concurrency, options.max_jobs, self.process.wake, telemetry)
        self.heads = HeadClaims(self.context, self.jobs)
        self.scheduler = Scheduler(self.context, self.process.wake)
        self.hand_back = HandBack(self.context)
        self.limited = LimitedClaims(self.context, self.jobs, self.hand_back)

    @property
    def worker_id(self) -> str:
        return self.context.worker_id

    @property
    def wake(self) -> Bell:
        return self.process.wake

    @property
    def stopping(self) -> Bell:
        return self.process.stopping

    @property
    def has_stuck_threads(self) -> bool:
        """Some job thread may still run: a job handed back at the shutdown timeout,
        or one given up at its deadline. The process must end with ``os._exit``
        (Python joins the job threads at exit, i.e. waits for those jobs)."""
        return bool(self.jobs.in_flight or self.jobs.abandoned)

    @property
    def in_flight(self) -> dict[str, StartedJob]:
        """The jobs still running (after :meth:`run`: those handed back at the timeout)."""
        return self.jobs.in_flight

    def install_signal_handlers(self) -> None:
        self.process.install_signal_handlers()

    def run(self) -> int:
        """Starts up (recurring schedules, worker row, topics, partitions; each retried
        through database errors), loops, drains, and cleans up whatever happened.
        Returns :data:`EXIT_NOT_TRANSIENT`, having logged why, when a database error
        that retrying cannot cure stopped it (see :func:`worker.process.is_transient`)."""
        try:
            return self._run()
        except DatabaseAway as away:
            self.process.stop_threads.set()
            logger.error(
                "worker %s gave up: the database has not answered for %.1fs (%s); a "
                "--burst worker retries it for --burst-patience seconds, then ends "
                "(exit status %d)",
                self.context.worker_id,
                away.seconds,
                away,
                EXIT_DATABASE_AWAY,
            )
            return EXIT_DATABASE_AWAY
        except NotTransient as stopped:
            self.process.stop_threads.set()
            logger.error(
                "worker %s stopped: %s; retrying cannot cure this error (a value the "
                "database refuses, or a statement it cannot run): check the worker's "
                "options and LATER settings, then start it again (exit status %d)",
                self.context.worker_id,
                stopped,
                EXIT_NOT_TRANSIENT,
            )
            return EXIT_NOT_TRANSIENT

    def _run(self) -> int:
        context, process = self.context, self.process
        logger.info(
            "worker %s: namespace %r, queues %s, concurrency %d",
            context.worker_id,
            context.namespace,
            ", ".join(context.options.shown_queues),
            context.options.concurrency,
        )
        process.with_retries(
            lambda: sync_configured_recurring(stores=context.stores, namespace=context.namespace)
        )
        listener, watch = start_wakeup(
            context.driver,
            context.namespace,
            process.wake,
            process.stop_threads,
            context.settings.worker_poll_interval,
        )
        heartbeat = self._heartbeat()
        try:
            process.with_retries(heartbeat.beat)
            process.with_retries(
                lambda: register_configured_topics(context.stores, context.settings)
            )
            process.with_retries(self.heads.refresh)
            heartbeat.start()
            loop = JobLoop(
                context,
                process=process,
                jobs=self.jobs,
                heads=self.heads,
                scheduler=self.scheduler,
                hand_back=self.hand_back,
                watch=watch,
                limited=self.limited,
            )
            stopped = self._loop(loop)
            process.announce_stop()
            drain(process, self.jobs, loop, self.hand_back)
        finally:
            self._exit(heartbeat, listener)
        logger.info("worker %s stopped after %d jobs", context.worker_id, self.jobs.finished_total)
        if stopped is not None:
            # Running jobs were let finish first; now the exit it asked for.
            raise stopped
        # A second signal that came after the drain: the exit it asked for, status 1.
        if process.exiting.is_set():
            return 1
        # Replaced only when a timeout, not a stop signal, ended the loop.
        if process.replace_reason is not None and process.stop_signal is None:
            return EXIT_REPLACE
        return 0

    def _loop(self, loop: JobLoop) -> NotTransient | None:
        """Runs ``loop``; the error that retrying cannot cure which stopped it, if one
        did (``stopping`` is rung: the drain lets the running jobs finish)."""
        try:
            loop.run()
        except NotTransient as stopped:
            return stopped
        return None

    def _heartbeat(self) -> Heartbeat:
        context = self.context
        row = WorkerRow(
            worker_id=context.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            concurrency=context.options.concurrency,
            queues=context.options.shown_queues,
            busy=0,
            started_at_ms=now_ms(),
            heartbeat_at_ms=now_ms(),
        )
        return Heartbeat(
            stores=context.stores,
            namespace=context.namespace,
            worker=row,
            lease_ms=context.lease_ms,
            held=self.jobs.held,
            finishing=self.jobs.finishing,
            stop=self.process.stop_threads,
            renew_also=self.limited.renew if self.limited.queues else None,
            busy_queues=self.jobs.busy_queues,
            telemetry=context.telemetry,
        )

    def _exit(self, heartbeat: Heartbeat, listener: NotificationListener | None) -> None:
        """Stops the helper threads, gives up the partition leases, writes the final
        metrics and has the heartbeat remove the worker row after its last beat;
        database errors are logged only."""
        self.process.stop_threads.set()
        try:
            self.heads.release_all()
        except DatabaseError:
            logger.warning("could not release partition leases; they will lapse")
        self.jobs.shutdown()
        try:
            self.limited.release_all()
        except DatabaseError:
            logger.warning("could not give back the queue slots; they will lapse")
        try:
            self.scheduler.flush_metrics()
        except DatabaseError:
            logger.warning("could not write the final metrics", exc_info=True)
        self.context.telemetry.flush()
        try:
            # After the heartbeat's last beat: one still in flight (a SQLite
            # writer waiting on the lock) would otherwise write the row back.
            heartbeat.retire(timeout=HEARTBEAT_RETIRE_SECONDS)
        except DatabaseError:
            logger.warning("could not remove the worker row; it ages out", exc_info=True)
        if listener is not None:
            listener.join(timeout=2)
