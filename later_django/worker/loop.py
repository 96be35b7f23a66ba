"""The main thread's cycle: claim, start, run on threads, finish; until told to stop.

Each turn, on the main thread's connection and in batches: hand back what an
earlier failed start left claimed; write the outcomes that completed since the
last turn (one transaction, which also starts the next heads of the
partitions those jobs ran on); claim up to CLAIM_BATCH messages (never more
than free threads), write their start (one transaction) and hand their jobs to
the job threads, in the order :mod:`~later_django.worker.start_writes` gives;
claim partition heads
(:mod:`~later_django.worker.heads`); run the periodic work
(:mod:`~later_django.worker.scheduler`). With nothing claimed it waits for
work (:mod:`~later_django.worker.wakeup`) at most IDLE_LOOK_SECONDS. A
database error is logged and the turn retried after a back-off, keeping what
completed until it can be written; a lost lock conflict runs the turn again at
once (:mod:`~later_django.worker.conflicts`). Job threads only run task code.

The loop returns when a stop signal came or the supervisor is gone, once
``--max-jobs`` are claimed and written, or (``--burst``) once nothing is
running, due or ready.
"""

from __future__ import annotations

import time

from django.db import Error as DatabaseError

from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.engine.cancellation import POLL_SECONDS
from later_django.engine.execution.finish import finish_and_continue
from later_django.engine.execution.start import plan_batch
from later_django.storage.queue import claim_in_doubt
from later_django.worker.cancel_watch import CancelWatch
from later_django.worker.claim_queues import NOTHING, ClaimQueues
from later_django.worker.conflicts import LockConflicts
from later_django.worker.deadlines import Deadlines
from later_django.worker.handback import HandBack
from later_django.worker.heads import CLAIM_BATCH, HeadClaims
from later_django.worker.jobs import RunningJobs
from later_django.worker.limited_claims import LimitedClaims
from later_django.worker.options import WorkerContext
from later_django.worker.process import STATEMENT_ERRORS, Backoff, ProcessControl
from later_django.worker.scheduler import Scheduler
from later_django.worker.session import SessionSetup
from later_django.worker.start_writes import StartWrites
from later_django.worker.task_calls import announce_finished
from later_django.worker.wakeup import Watch, wait_for_work

#: A look at the queue at least this often, for messages due by time alone.
IDLE_LOOK_SECONDS = 1.0
#: While partition jobs run, how long an empty delivery queue is not looked at again.
QUEUE_RECHECK_SECONDS = 0.05


class JobLoop:
    """One process's claim → start → run → finish cycle (main thread only)."""

    def __init__(
        self,
        context: WorkerContext,
        *,
        process: ProcessControl,
        jobs: RunningJobs,
        heads: HeadClaims,
        scheduler: Scheduler,
        hand_back: HandBack,
        watch: Watch | None,
        limited: LimitedClaims | None = None,
    ) -> None:
        self.context = context
        self.process = process
        self.jobs = jobs
        self.heads = heads
        self.scheduler = scheduler
        self.hand_back = hand_back
        self._watch = watch
        self._session = SessionSetup(context)
        self.limited = limited or LimitedClaims(context, jobs, hand_back)
        self._queues = ClaimQueues(
            context.stores,
            context.namespace,
            context.options.queues,
            limited=frozenset(self.limited.queues),
        )
        self.cancels = CancelWatch(context, jobs, heads)
        self.deadlines = Deadlines(context, jobs, process)
        self.starts = StartWrites(
            jobs, hand_back, launch_first=not context.driver.serializes_writes
        )
        self._last_claim_was_full = False
        self._queue_empty_at: float | None = None

    def run(self) -> None:
        """Turns until a stop condition (see the module); database errors back off."""
        backoff = Backoff()
        conflicts = LockConflicts(self.context.driver, self.context.telemetry)
        while not self.process.should_stop():
            try:
                if self._turn():
                    return
                backoff.reset()
                conflicts.reset()
            except STATEMENT_ERRORS as error:
                if not conflicts.absorb(error):
                    self.process.database_trouble(error, backoff)

    def _turn(self) -> bool:
        """One turn; returns whether the loop is done (max jobs, or the burst is over)."""
        self.process.alive()
        self._session.set_up()
        self.hand_back.flush()
        self.cancels.poll()
        self.deadlines.check()
        self.finish_completed()
        if self.jobs.done_with_max_jobs():
            return True
        claimed = self._claim_and_start()
        # After this turn's finish and claim: what holds while the loop waits next.
        self.context.telemetry.threads(len(self.jobs.in_flight), self.jobs.concurrency)
        self.scheduler.tick()
        if claimed:
            return False
        # A burst worker promotes what is due itself (not waiting for the promote
        # pass), and ends once nothing is left.
        if self.context.options.burst and self.jobs.idle():
            promoted = self.scheduler.promote_due_now()
            if not promoted and self._nothing_left():
                return True
        # With every thread busy only a finished job is worth waking for; while jobs
        # run, a cancel request must reach them within POLL_SECONDS.
        watch = self._watch if self.jobs.free_slots() > 0 else None
        timeout = POLL_SECONDS if self.jobs.any_running() else IDLE_LOOK_SECONDS
        wait_for_work(self.process.wake, timeout, watch)
        return False

    def _claim_and_start(self) -> int:
        """Claims from the delivery queue, then from the heads of held partitions.

        While partition jobs keep the loop busy, an empty delivery queue is looked
        at again only after QUEUE_RECHECK_SECONDS (a round trip saved per batch)."""
        now = time.monotonic()
        if (
            self._queue_empty_at is not None
            and now - self._queue_empty_at < QUEUE_RECHECK_SECONDS
            and self.jobs.busy_partitions()
        ):
            claimed = 0
        else:
            claimed = self._claim_queue()
            self._queue_empty_at = now if claimed == 0 else None
        return claimed + self.heads.claim(self.cancels.requests)

    def _claim_queue(self) -> int:
        """Claims ready messages and starts their jobs: of the plain queues, then of
        the limited ones (:class:`LimitedClaims`); a failed plan hands the messages
        back (:class:`HandBack`) and raises, and so does a failed start write
        (:class:`StartWrites`: handed back, or written again at the next turn)."""
        claimed = self._claim_plain()
        if self.limited.queues and self.jobs.free_slots() > 0:
            self._queues.current()  # the paused set, fresh
            claimed += self.limited.claim(self._queues.paused, self.cancels.requests)
        return claimed

    def _claim_plain(self) -> int:
        free = self.jobs.free_slots()
        if free <= 0:
            return 0
        context = self.context
        queue = context.stores.queue
        queue_names = self._queues.current()
        if queue_names == NOTHING:
            return 0
        # Where a claim takes the database's write lock, or a poll woke the loop
        # with most likely nothing ready, a read that takes no lock first; skipped
        # right after a full batch, when more is most likely waiting.
        if (
            (context.driver.serializes_writes or context.driver.polls_for_work)
            and not self._last_claim_was_full
            and not queue.has_ready(context.namespace, queue_names)
        ):
            return 0
        batch_size = min(CLAIM_BATCH, free)
        try:
            messages = queue.claim(
                context.namespace,
                queue_names,
                context.worker_id,
                context.lease_ms,
                batch_size=batch_size,
            )
        except DatabaseError as error:
            # A claim that may have committed unheard: its messages are handed back, not
            # left leased to this worker until the lease lapses.
            self.hand_back.unstarted(claim_in_doubt(error))
            raise
        self._last_claim_was_full = len(messages) == batch_size
        if not messages:
            return 0
        self.jobs.claimed(len(messages))
        try:
            start = plan_batch(
                messages,
                stores=context.stores,
                namespace=context.namespace,
                worker_id=context.worker_id,
                lease_ms=context.lease_ms,
                settings=context.settings,
                cancels=self.cancels.requests,
            )
        except DatabaseError:
            self.hand_back.unstarted([message.sequence for message in messages])
            raise
        self.starts.start(start)
        return len(messages)

    def finish_completed(self) -> None:
        """Writes the outcomes completed so far in one transaction, which also starts
        the next heads of their partitions (into the slots they free; none once
        stopping), then announces the finished jobs. A failed write keeps them.
        First, the start of any batch whose start write failed (a job's start
        commits before its outcome)."""
        self.starts.flush()
        if not self.jobs.completed:
            return
        outcomes = self.jobs.begin_writing()
        slots = 0 if self.process.stopping.is_set() else self.jobs.slots_freed_by(outcomes)
        context = self.context
        try:
            records, started = finish_and_continue(
                outcomes,
                stores=context.stores,
                namespace=context.namespace,
                worker_id=context.worker_id,
                settings=context.settings,
                lease_ms=context.lease_ms,
                slots=max(0, slots),
                cancels=self.cancels.requests,
            )
        except BaseException:
            self.jobs.write_failed()
            raise
        self.heads.after_finish(outcomes, started, slots)
        self.jobs.written(outcomes, started)
        self.limited.finished(outcomes)
        context.telemetry.finished(outcomes, records)
        for outcome, record in zip(outcomes, records, strict=True):
            if record.stage != stages.RUNNING:  # still running: a fenced, stale outcome
                announce_finished(outcome, record)

    def _nothing_left(self) -> bool:
        """No partition head is runnable (held here or elsewhere) and no message is
        ready: what ends a burst once nothing runs and nothing is due."""
        context = self.context
        if context.stores.partitions.runnable_head_exists(context.namespace, now_ms()):
            return False
        queue_names = self._queues.current()
        if queue_names is not None:
            paused = self._queues.paused
            queue_names = (*queue_names, *(q for q in self.limited.queues if q not in paused))
        return queue_names == NOTHING or not context.stores.queue.has_ready(
            context.namespace, queue_names
        )
