"""The jobs one process holds, from their start until their outcome is written.

Shared by the main thread (which starts jobs and writes outcomes), the job
threads (which append outcomes) and the heartbeat (which renews what is held).
A job is *in flight* from :meth:`RunningJobs.launch` until
:meth:`RunningJobs.written`; its outcome waits in ``completed`` meanwhile, and
while its write runs its sequence is *being written* (the heartbeat does not
count a lease it no longer finds as lost). ``in_flight`` and the set being
written change under one lock; ``completed`` is a deque (append and popleft
are atomic).
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from later_django.core.clock import now_ms
from later_django.engine.execution.values import Outcome, StartedJob
from later_django.storage.partitions import Partition
from later_django.worker.bell import Bell
from later_django.worker.task_calls import run_job
from later_django.worker.telemetry import NO_TELEMETRY, Telemetry


class RunningJobs:
    """In-flight jobs, their outcomes, the job threads, and the ``--max-jobs`` count.

    ``claimed_total`` counts claimed messages and started heads (a stale message
    that is only acknowledged counts too); ``finished_total`` written outcomes.
    """

    def __init__(
        self,
        concurrency: int,
        max_jobs: int | None,
        wake: Bell,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.concurrency = concurrency
        self._telemetry = telemetry
        self.max_jobs = max_jobs
        self._wake = wake
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="later-job")
        self._lock = threading.Lock()
        self.in_flight: dict[str, StartedJob] = {}
        self.completed: deque[Outcome] = deque()
        #: Jobs given up past their deadline: their outcome, if it ever comes, is dropped.
        self.abandoned: set[str] = set()
        self._writing: set[int] = set()
        self.claimed_total = 0
        self.finished_total = 0

    # --- reads (any thread) ---

    def idle(self) -> bool:
        """Nothing runs and no outcome waits to be written."""
        return not self.in_flight and not self.completed

    def any_running(self) -> bool:
        with self._lock:
            return bool(self.in_flight)

    def free_slots(self) -> int:
        """How many more jobs may start now (threads free, ``--max-jobs`` left)."""
        with self._lock:
            busy = len(self.in_flight)
        return max(0, self._capped(self.concurrency - busy))

    def slots_freed_by(self, outcomes: Sequence[Outcome]) -> int:
        """How many jobs may start once ``outcomes`` (in flight now) are written."""
        with self._lock:
            slots = self.concurrency - len(self.in_flight) + len(outcomes)
        return self._capped(slots)

    def done_with_max_jobs(self) -> bool:
        """``--max-jobs`` is reached and every claimed job's outcome is written."""
        return self.max_jobs is not None and self.claimed_total >= self.max_jobs and self.idle()

    def busy_partitions(self) -> set[Partition]:
        """The partitions whose head runs here."""
        with self._lock:
            started = list(self.in_flight.values())
        return {job.partition for job in started if job.partition is not None}

    def flag_cancelled(self, job_ids: set[str]) -> list[StartedJob]:
        """Sets the cancel flag of the jobs in flight among ``job_ids``; returns the jobs
        newly flagged."""
        with self._lock:
            started = [job for job in self.in_flight.values() if job.record.job_id in job_ids]
        flagged = [job for job in started if not job.cancel.is_set()]
        for job in started:
            job.cancel.set()
        return flagged

    def abandon_past_deadline(self, now_ms: int) -> list[StartedJob]:
        """Takes out of flight the jobs whose deadline is at or before ``now_ms`` and
        whose outcome has not come: from here on their outcome is dropped, their lease
        is not renewed, and they hold no thread slot. Returns them."""
        with self._lock:
            due = [
                job
                for job in self.in_flight.values()
                if job.deadline_ms is not None and job.deadline_ms <= now_ms
            ]
            if not due:
                return []
            done = {outcome.started.record.job_id for outcome in self.completed}
            due = [job for job in due if job.record.job_id not in done]
            self._give_up({job.record.job_id for job in due})
            return due

    def abandon(self, started: Sequence[StartedJob]) -> None:
        """Takes ``started`` out of flight as :meth:`abandon_past_deadline` does: their
        outcome, if it comes or has come, is dropped; their leases are not renewed."""
        ids = {job.record.job_id for job in started}
        with self._lock:
            self._give_up(ids)
            kept = [done for done in self.completed if done.started.record.job_id not in ids]
            if len(kept) != len(self.completed):
                self.completed.clear()
                self.completed.extend(kept)

    def busy_queues(self) -> dict[str, int]:
        """Jobs in flight per queue (queues with none left out)."""
        with self._lock:
            return dict(Counter(job.record.queue_name for job in self.in_flight.values()))

    def running_job_ids(self) -> list[str]:
        with self._lock:
            return [job.record.job_id for job in self.in_flight.values()]

    def held(self) -> tuple[list[int], list[str]]:
        """The message sequences (jobs from partition heads have none) and the job
        ids of every job in flight."""
        with self._lock:
            started = list(self.in_flight.values())
        sequences = [job.sequence for job in started if job.sequence is not None]
        return sequences, [job.record.job_id for job in started]

    def finishing(self) -> set[int]:
        """The sequences whose outcome is being written right now."""
        with self._lock:
            return set(self._writing)

    def _give_up(self, job_ids: set[str]) -> None:
        """Out of flight, their outcomes dropped from now on; call under the lock."""
        for job_id in job_ids:
            self.in_flight.pop(job_id, None)
            self.abandoned.add(job_id)

    def _capped(self, slots: int) -> int:
        if self.max_jobs is None:
            return slots
        return min(slots, self.max_jobs - self.claimed_total)

    # --- changes (main thread) ---

    def claimed(self, count: int) -> None:
        self.claimed_total += count

    def launch(self, started: Sequence[StartedJob]) -> None:
        """Puts ``started`` in flight and on the job threads."""
        with self._lock:
            for job in started:
                self.in_flight[job.record.job_id] = job
        self._submit(started)

    def begin_writing(self) -> list[Outcome]:
        """The outcomes waiting now, marked as being written."""
        outcomes = list(self.completed)
        with self._lock:
            self._writing = {
                outcome.started.sequence
                for outcome in outcomes
                if outcome.started.sequence is not None
            }
        return outcomes

    def write_failed(self) -> None:
        """The write of :meth:`begin_writing`'s outcomes failed: they wait on."""
        with self._lock:
            self._writing = set()

    def written(self, outcomes: Sequence[Outcome], started: Sequence[StartedJob]) -> None:
        """``outcomes`` are written, and the jobs ``started`` with them (the next
        heads of their partitions) go in flight."""
        self.claimed_total += len(started)
        for _ in outcomes:
            self.completed.popleft()
        with self._lock:
            for outcome in outcomes:
                self.in_flight.pop(outcome.started.record.job_id, None)
            for job in started:
                self.in_flight[job.record.job_id] = job
            self._writing = set()
        self._submit(started)
        self.finished_total += len(outcomes)

    def shutdown(self) -> None:
        """Stops the job threads from taking more; does not wait for running jobs."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _submit(self, started: Sequence[StartedJob]) -> None:
        if started:
            self._telemetry.started(started, now_ms())
        for job in started:
            self._pool.submit(self._run, job)

    def _run(self, job: StartedJob) -> None:
        """On a job thread: runs the job, files its outcome (dropped for a job given up
        at its deadline), wakes the main thread."""
        outcome = run_job(job)
        with self._lock:
            if job.record.job_id in self.abandoned:
                return
            self.completed.append(outcome)
        self._wake.set()
