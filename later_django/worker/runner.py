"""One worker process: claim a batch, write it running, run it on threads, write the outcomes.

All database work of the job path happens on the main thread's connection,
in batches: one claim (up to 16 messages, never more than free threads), one
transaction to start what was claimed, one transaction to finish whatever
completed since the last look. Job threads only run task code. Jobs on topic
partitions are claimed from the heads of the partitions this worker leases
(``worker.partitions``), and a partition's next head starts inside the
transaction that finishes the previous one. The main thread also runs the due
maintenance passes (promotion every 0.5 s, recurring ticks, sweep, ...: each
by one process per namespace at a time, ``later_django.maintenance``) and
flushes metrics about once a second.

Faults: a job's exception is its own failure; a database error (server
restarted, SQLite busy past its timeout) is logged and retried with back-off,
keeping what completed until it can be written; the first SIGTERM/SIGINT stops
claiming and lets running jobs finish (up to the shutdown timeout, after which
their messages and leases are handed back), the second exits at once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import signal
import socket
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.db import Error as DatabaseError
from django.db import close_old_connections, connections
from django.tasks import TaskContext, TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils.crypto import get_random_string

from later_django.conf import later_settings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import due_scan_bounds
from later_django.core.payload import json_compatible
from later_django.core.records import JobRecord
from later_django.engine import metrics
from later_django.engine.execution import (
    Outcome,
    StartedJob,
    finish_and_continue,
    start_batch,
    start_heads,
)
from later_django.engine.moves import error_from_exception
from later_django.engine.promotion import promote_all_due
from later_django.engine.recurring import sync_configured_recurring
from later_django.engine.results import task_result
from later_django.engine.topics import register_configured_topics
from later_django.maintenance.framework import PassRunner
from later_django.storage.django import DjangoStorage
from later_django.storage.partitions import PartitionStore
from later_django.storage.stores import stores_for
from later_django.storage.types import WorkerRow
from later_django.worker.bell import Bell
from later_django.worker.heartbeat import Heartbeat
from later_django.worker.partitions import PartitionAssignment
from later_django.worker.wakeup import PostgresListener, SqliteChangeWatch, wait_for_work

logger = logging.getLogger("later_django.worker")

CLAIM_BATCH = 16
#: A look at the queue at least this often, for messages due by time alone.
IDLE_LOOK_SECONDS = 1.0
#: While the delivery queue keeps the worker busy, partition heads are still
#: looked at least this often.
HEAD_LOOK_SECONDS = 0.25
#: While partition jobs run, how long an empty delivery queue is not looked at again.
QUEUE_RECHECK_SECONDS = 0.05
METRICS_FLUSH_SECONDS = 1.0
#: How long an orphaned child (its supervisor died) lets running jobs finish
#: before it hands them back and exits (capped by ``--shutdown-timeout``).
ORPHAN_SHUTDOWN_SECONDS = 5.0


@dataclass
class WorkerOptions:
    queues: list[str]
    concurrency: int = 10
    burst: bool = False
    max_jobs: int | None = None
    shutdown_timeout: float = 30.0
    lease_seconds: float = 30.0
    #: A supervised child's supervisor: once it is gone (``os.getppid()`` changes),
    #: the child stops, with at most ORPHAN_SHUTDOWN_SECONDS of grace.
    parent_pid: int | None = None


@dataclass
class _Backoff:
    delay: float = 0.0
    failures: int = field(default=0)

    def next(self) -> float:
        self.failures += 1
        self.delay = min(5.0, 0.1 * 2 ** (self.failures - 1))
        return self.delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.failures = 0


class Worker:
    """Runs jobs of ``options.queues`` until stopped; :meth:`run` returns the exit code."""

    def __init__(self, options: WorkerOptions) -> None:
        self.options = options
        self.settings = later_settings()
        self.using = self.settings.database
        self.namespace = self.settings.namespace
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{get_random_string(6)}"
        self.lease_ms = int(options.lease_seconds * 1000)
        self.pool = ThreadPoolExecutor(options.concurrency, thread_name_prefix="later-job")
        self._lock = threading.Lock()
        self.in_flight: dict[str, StartedJob] = {}
        self.completed: deque[Outcome] = deque()
        #: Sequences whose outcome is being written (acknowledged) right now.
        self._writing: set[int] = set()
        # Bells, not Events: the signal handler rings them (see worker.bell).
        self.wake = Bell()
        self.stopping = Bell()
        self.stop_threads = threading.Event()
        self.signals_seen = 0
        self.stop_signal: int | None = None
        #: Claimed messages whose start failed and whose hand-back failed too; handed
        #: back as soon as the database answers again (not left to their leases).
        self._unstarted: list[int] = []
        self.claimed_total = 0
        self.finished_total = 0
        self._watch: SqliteChangeWatch | None = None
        self._session_prepared_for: object = None
        self._last_claim_was_full = False
        #: Partition heads are looked at when this is set, when nothing runs, and
        #: every HEAD_LOOK_SECONDS while busy.
        self._heads_dirty = True
        self._last_head_look = 0.0
        self._queue_empty_at: float | None = None
        self.partitions = PartitionAssignment(
            using=self.using,
            namespace=self.namespace,
            worker_id=self.worker_id,
            settings=self.settings,
            lease_ms=self.lease_ms,
            busy=self._busy_partitions,
        )

    # --- life cycle ---

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT stop the worker; unblocks them (a supervised child starts
        with them blocked, so one that came during its start-up is handled now)."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

    def _on_signal(self, signum: int, frame: object) -> None:
        """Takes no lock (it may interrupt this very thread inside one): counts,
        rings the bells, and on a second signal exits. The loop logs the stop."""
        self.signals_seen += 1
        if self.signals_seen > 1:
            try:
                # Logging here may find this thread inside a write (RuntimeError):
                # the exit must happen all the same.
                logger.warning("second signal: exiting at once")
            finally:
                os._exit(1)
        self.stop_signal = signum
        self.stopping.ring()
        self.wake.ring()

    def _orphaned(self) -> bool:
        parent = self.options.parent_pid
        return parent is not None and os.getppid() != parent

    def _announce_stop(self) -> None:
        if self._orphaned():
            logger.warning(
                "supervisor %d is gone: finishing running jobs (at most %.0fs), then exiting",
                self.options.parent_pid,
                self._shutdown_seconds(),
            )
        elif self.stopping.is_set():
            logger.info("signal %s: finishing running jobs, then exiting", self.stop_signal)

    def _shutdown_seconds(self) -> float:
        if self._orphaned():
            return min(self.options.shutdown_timeout, ORPHAN_SHUTDOWN_SECONDS)
        return self.options.shutdown_timeout

    def run(self) -> int:
        queue_names = ", ".join(self.options.queues)
        logger.info(
            "worker %s: namespace %r, queues %s, concurrency %d",
            self.worker_id,
            self.namespace,
            queue_names,
            self.options.concurrency,
        )
        self._with_retries(
            lambda: sync_configured_recurring(
                stores=stores_for(self.using), namespace=self.namespace
            )
        )
        vendor = connections[self.using].vendor
        listener = None
        if vendor == "postgresql":
            listener = PostgresListener(self.using, self.namespace, self.wake, self.stop_threads)
            listener.start()
        else:
            self._watch = SqliteChangeWatch(self.using)
        row = WorkerRow(
            worker_id=self.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            concurrency=self.options.concurrency,
            queues=list(self.options.queues),
            busy=0,
            started_at_ms=now_ms(),
            heartbeat_at_ms=now_ms(),
        )
        heartbeat = Heartbeat(
            using=self.using,
            namespace=self.namespace,
            worker=row,
            lease_ms=self.lease_ms,
            held=self._held,
            finishing=self._finishing,
            stop=self.stop_threads,
        )
        self._with_retries(lambda: heartbeat.beat())
        self._with_retries(lambda: register_configured_topics(self.using, self.settings))
        self._with_retries(self.partitions.refresh)
        heartbeat.start()
        try:
            self._loop()
            self._announce_stop()
            self._drain()
        finally:
            self.stop_threads.set()
            try:
                self.partitions.release_all()
            except DatabaseError:
                logger.warning("could not release partition leases; they will lapse")
            self.pool.shutdown(wait=False, cancel_futures=True)
            try:
                metrics.flush()
                DjangoStorage(self.using).worker_remove(self.namespace, self.worker_id)
            except DatabaseError:
                logger.warning("could not write final metrics / remove worker row", exc_info=True)
            heartbeat.join(timeout=2)
            if listener is not None:
                listener.join(timeout=2)
        logger.info("worker %s stopped after %d jobs", self.worker_id, self.finished_total)
        return 0

    def _finishing(self) -> set[int]:
        with self._lock:
            return set(self._writing)

    def _held(self) -> tuple[list[int], list[str]]:
        with self._lock:
            started = list(self.in_flight.values())
        sequences = [job.sequence for job in started if job.sequence is not None]
        return sequences, [job.record.job_id for job in started]

    def _with_retries(self, action) -> None:  # type: ignore[no-untyped-def]
        backoff = _Backoff()
        while True:
            try:
                action()
                return
            except DatabaseError as error:
                self._database_trouble(error, backoff)
                if self.stopping.is_set() and backoff.failures > 3:
                    raise

    def _database_trouble(self, error: Exception, backoff: _Backoff) -> None:
        delay = backoff.next()
        logger.warning("database error (%s); retrying in %.2fs", error, delay)
        with contextlib.suppress(Exception):
            connections[self.using].close()
        # Once stopping, the event is set and would not wait: sleep instead.
        if self.stopping.is_set():
            time.sleep(delay)
        else:
            self.stopping.wait(delay)

    # --- the loop ---

    def _loop(self) -> None:
        backoff = _Backoff()
        while not self.stopping.is_set() and not self._orphaned():
            try:
                self._prepare_session()
                self._hand_back_unstarted()
                self._finish_completed()
                if self._done_with_max_jobs():
                    return
                claimed = self._claim_and_start()
                self._periodic()
                if claimed:
                    backoff.reset()
                    continue
                if self.options.burst and self._burst_is_over():
                    return
                # With every thread busy only a finished job is worth waking for.
                watch = self._watch if self._free_slots() > 0 else None
                wait_for_work(self.wake, IDLE_LOOK_SECONDS, watch)
                backoff.reset()
            except DatabaseError as error:
                self._database_trouble(error, backoff)

    def _prepare_session(self) -> None:
        """PostgreSQL: the worker's own connection commits asynchronously
        (``synchronous_commit = off``), once per (re)connection.

        Everything this connection writes is bookkeeping that delivery repairs:
        a claim, a start, an outcome, a promotion. A server crash can lose only
        the last fraction of a second of such commits (never a job: enqueues are
        made on other connections and stay synchronous), and what is lost is
        delivered again: a claim lapses, a job runs again - the at-least-once
        contract every handler already honours. In exchange the job path does
        not wait for a WAL flush three times per batch.
        ``LATER["WORKER_SYNCHRONOUS_COMMIT"] = True`` keeps every commit synchronous.
        """
        connection = connections[self.using]
        if connection.vendor != "postgresql" or self.settings.worker_synchronous_commit:
            return
        connection.ensure_connection()
        if connection.connection is self._session_prepared_for:
            return
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit = off")
        self._session_prepared_for = connection.connection

    def _free_slots(self) -> int:
        with self._lock:
            busy = len(self.in_flight)
        free = self.options.concurrency - busy
        if self.options.max_jobs is not None:
            free = min(free, self.options.max_jobs - self.claimed_total)
        return max(0, free)

    def _claim_and_start(self) -> int:
        """Claims from the delivery queue, then from the heads of held partitions.

        While partition jobs keep the loop busy, an empty delivery queue is looked
        at again only after QUEUE_RECHECK_SECONDS (a round trip saved per batch)."""
        now = time.monotonic()
        if (
            self._queue_empty_at is not None
            and now - self._queue_empty_at < QUEUE_RECHECK_SECONDS
            and self._busy_partitions()
        ):
            claimed = 0
        else:
            claimed = self._claim_queue()
            self._queue_empty_at = now if claimed == 0 else None
        return claimed + self._claim_heads()

    def _busy_partitions(self) -> set[tuple[str, int]]:
        with self._lock:
            started = list(self.in_flight.values())
        return {job.partition for job in started if job.partition is not None}

    def _claim_heads(self) -> int:
        """Starts runnable heads of the partitions this worker leases (at most one
        running job per partition: its own running heads are left out)."""
        self.partitions.maintain()
        if not self.partitions.held:
            return 0
        free = self._free_slots()
        if free <= 0:
            return 0
        now = time.monotonic()
        with self._lock:
            idle = not self.in_flight
        # Busy: the next heads of finished partitions start with the finish, so only a
        # partition newly runnable (enqueue into an empty one, a head now due) is
        # looked for, every HEAD_LOOK_SECONDS. Idle: at every wake-up.
        if not (idle or self._heads_dirty or now - self._last_head_look >= HEAD_LOOK_SECONDS):
            return 0
        self._heads_dirty = False
        self._last_head_look = now
        with self._lock:
            running = [job.record.job_id for job in self.in_flight.values()]
        claims = PartitionStore(self.using).claim_heads(
            self.namespace, self.worker_id, now_ms(), running, min(CLAIM_BATCH, free)
        )
        if not claims:
            return 0
        started = start_heads(
            claims,
            stores=stores_for(self.using),
            namespace=self.namespace,
            worker_id=self.worker_id,
            lease_ms=self.lease_ms,
            settings=self.settings,
        )
        self.claimed_total += len(started)
        with self._lock:
            for job in started:
                self.in_flight[job.record.job_id] = job
        for job in started:
            self.pool.submit(self._run_job, job)
        # Heads that were not started (a lost attempt now retried) may be runnable.
        self._heads_dirty = len(started) < len(claims)
        return len(claims)

    def _claim_queue(self) -> int:
        free = self._free_slots()
        if free <= 0:
            return 0
        queue = stores_for(self.using).queue
        # SQLite: a read that takes no lock before the claim, which takes the write
        # lock; skipped right after a full batch, when more is most likely waiting.
        if (
            self._watch is not None
            and not self._last_claim_was_full
            and not queue.has_ready(self.namespace, self.options.queues)
        ):
            return 0
        batch_size = min(CLAIM_BATCH, free)
        messages = queue.claim(
            self.namespace,
            self.options.queues,
            self.worker_id,
            self.lease_ms,
            batch_size=batch_size,
        )
        self._last_claim_was_full = len(messages) == batch_size
        if not messages:
            return 0
        self.claimed_total += len(messages)
        try:
            started = start_batch(
                messages,
                stores=stores_for(self.using),
                namespace=self.namespace,
                worker_id=self.worker_id,
                lease_ms=self.lease_ms,
                settings=self.settings,
            )
        except DatabaseError:
            self._hand_back([message.sequence for message in messages])
            raise
        with self._lock:
            for job in started:
                self.in_flight[job.record.job_id] = job
        for job in started:
            self.pool.submit(self._run_job, job)
        return len(messages)

    def _hand_back(self, sequences: list[int]) -> None:
        """Makes claimed messages whose start failed ready again at once. When the
        database does not answer, they are kept and handed back by the next loop
        that reaches it (:meth:`_hand_back_unstarted`), well before their leases
        would lapse; only if the process dies first do they wait for the lease."""
        self._unstarted.extend(sequences)
        try:
            self._hand_back_unstarted()
        except DatabaseError:
            logger.warning(
                "could not hand back %d message(s) yet; retrying when the database answers",
                len(self._unstarted),
            )

    def _hand_back_unstarted(self) -> None:
        """Hands back :attr:`_unstarted` (only messages this worker still leases
        change); raises the database error and keeps them when it fails."""
        if not self._unstarted:
            return
        handed = stores_for(self.using).queue.nack(self.worker_id, self._unstarted)
        logger.info("handed back %d unstarted message(s)", handed)
        self._unstarted = []

    def _run_job(self, job: StartedJob) -> None:
        """Runs on a job thread: calls the task, records its outcome, wakes the loop."""
        close_old_connections()
        record = job.record
        try:
            result = task_result(record, job.task, record.backend)
            task_started.send(sender=type(job.task.get_backend()), task_result=result)
            if job.task.takes_context:
                value = job.task.call(
                    TaskContext(task_result=result), *record.args, **record.kwargs
                )
            else:
                value = job.task.call(*record.args, **record.kwargs)
            outcome = Outcome(job, return_value=json_compatible(value, "the return value"))
        except BaseException as error:  # the job's failure, never the worker's
            outcome = Outcome(job, error=error_from_exception(error, now_ms(), record.attempts))
        finally:
            close_old_connections()
        self.completed.append(outcome)
        self.wake.set()

    def _finish_completed(self) -> None:
        if not self.completed:
            return
        outcomes = list(self.completed)
        with self._lock:
            self._writing = {o.started.sequence for o in outcomes if o.started.sequence is not None}
        # Slots the finished jobs free, for the partitions' next heads (started in
        # the same transaction); none once stopping.
        with self._lock:
            slots = self.options.concurrency - len(self.in_flight) + len(outcomes)
        if self.stopping.is_set():
            slots = 0
        if self.options.max_jobs is not None:
            slots = min(slots, self.options.max_jobs - self.claimed_total)
        try:
            records, started = finish_and_continue(
                outcomes,
                stores=stores_for(self.using),
                namespace=self.namespace,
                worker_id=self.worker_id,
                settings=self.settings,
                lease_ms=self.lease_ms,
                slots=max(0, slots),
            )
        except BaseException:
            with self._lock:
                self._writing = set()
            raise
        if any(outcome.started.partition is not None for outcome in outcomes) and (
            len(started) >= slots
        ):
            # The finish started as many next heads as it could: others may wait.
            self._heads_dirty = True
        self.claimed_total += len(started)
        for _ in outcomes:
            self.completed.popleft()
        with self._lock:
            for outcome in outcomes:
                self.in_flight.pop(outcome.started.record.job_id, None)
            for job in started:
                self.in_flight[job.record.job_id] = job
            self._writing = set()
        for job in started:
            self.pool.submit(self._run_job, job)
        self.finished_total += len(outcomes)
        for outcome, record in zip(outcomes, records, strict=True):
            if record.stage != stages.RUNNING:  # still running: a fenced, stale outcome
                self._announce_finished(outcome, record)

    def _announce_finished(self, outcome: Outcome, record: JobRecord) -> None:
        try:
            result = task_result(record, outcome.started.task, record.backend)
            if result.status != TaskResultStatus.READY:
                task_finished.send(
                    sender=type(outcome.started.task.get_backend()), task_result=result
                )
        except Exception:
            logger.exception("a task_finished receiver failed for job %s", record.job_id)

    def _done_with_max_jobs(self) -> bool:
        """``--max-jobs`` counts claimed messages (a stale one that is only
        acknowledged counts too), and the process leaves once they are all written."""
        limit = self.options.max_jobs
        return (
            limit is not None
            and self.claimed_total >= limit
            and not self.in_flight
            and not self.completed
        )

    def _periodic(self) -> None:
        """The maintenance passes that are due (promotion every 0.5 s among them; each
        pass run by one process per namespace at a time), and the metrics flush."""
        self._promote_if_due()
        if metrics.accumulator.seconds_since_flush() >= METRICS_FLUSH_SECONDS:
            metrics.flush()

    @functools.cached_property
    def _maintenance(self) -> PassRunner:
        return PassRunner(
            using=self.using,
            namespace=self.namespace,
            settings=self.settings,
            owner=self.worker_id,
        )

    def _promote_if_due(self) -> int:
        """Runs the due maintenance passes; returns how many jobs were promoted (and
        wakes the loop to claim them)."""
        runs = self._maintenance.run_due()
        promoted = sum(run.done for run in runs if run.name == "promote")
        if promoted:
            self.wake.set()
        return promoted

    def _burst_is_over(self) -> bool:
        if self.in_flight or self.completed:
            return False
        if PartitionStore(self.using).runnable_head_exists(self.namespace, now_ms()):
            return False  # a partition head is runnable (held here or elsewhere)
        storage = DjangoStorage(self.using)
        start, stop = due_scan_bounds(self.namespace, now_ms())
        if storage.key_scan(start, stop, 1):
            promote_all_due(stores=stores_for(self.using), namespace=self.namespace)
            return False
        return not stores_for(self.using).queue.has_ready(self.namespace, self.options.queues)

    # --- stopping ---

    def _drain(self) -> None:
        """After the loop: hand back unstarted messages, wait for running jobs (up to
        the shutdown timeout), write their outcomes, and hand back the messages of
        jobs still running."""
        deadline = time.monotonic() + self._shutdown_seconds()
        backoff = _Backoff()
        while (self.in_flight or self._unstarted) and time.monotonic() < deadline:
            try:
                self._hand_back_unstarted()
                self._finish_completed()
            except DatabaseError as error:
                self._database_trouble(error, backoff)
                continue
            if self.in_flight:
                self.wake.wait(min(0.05, max(0.0, deadline - time.monotonic())))
                self.wake.clear()
        if self.completed:
            self._with_retries(self._finish_completed)
        if self.in_flight:
            sequences, job_ids = self._held()
            logger.warning("shutdown timeout: handing back %d job(s) still running", len(sequences))
            try:
                stores_for(self.using).queue.nack(self.worker_id, sequences)
                # Lapsed now rather than deleted: the next worker records the
                # interrupted attempt under this worker's name.
                DjangoStorage(self.using).lease_renew(
                    self.namespace, self.worker_id, job_ids, now_ms()
                )
            except DatabaseError:
                logger.warning("could not hand back; their leases will lapse", exc_info=True)
