"""``run_jobs``: run what is queued now, in the calling thread, on the caller's connection.

A test enqueues (inside its own transaction, rolled back at its end, or
committed in a transactional test), calls :func:`run_jobs`, and reads the
results. Nothing here runs a task another way than a worker does: jobs are
claimed from the delivery queue (or from partition heads) and go through the
engine's start and finish (:func:`~later_django.engine.execution.start.start_batch`,
:func:`~later_django.engine.execution.heads.start_heads`,
:func:`~later_django.engine.execution.finish.finish_and_continue`) and the worker's
task call (:func:`~later_django.worker.task_calls.run_job`), so retries,
continuations, partitions, outcomes and Django's task signals behave as under
``later_worker``. Only the threads, the heartbeat and the maintenance passes
are left out: one job runs at a time, in claim order.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.utils.crypto import get_random_string

from later_django.compat.tasks import Task, TaskResult
from later_django.conf import LaterSettings, later_settings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.records import JobRecord, decode_record
from later_django.engine.execution.finish import finish_and_continue
from later_django.engine.execution.heads import start_heads
from later_django.engine.execution.start import start_batch
from later_django.engine.execution.values import StartedJob
from later_django.engine.promotion import promote_all_due
from later_django.engine.results import task_result
from later_django.exceptions import RecordDecodeError
from later_django.storage.partitions import HeadClaim, Partition
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import ClaimedMessage
from later_django.worker.partitions import all_partitions
from later_django.worker.task_calls import announce_finished, run_job

#: The most task calls one :func:`run_jobs` makes unless told otherwise.
DEFAULT_MAX_JOBS = 100
#: Queue and partition leases of a run: long, since nothing renews them (no heartbeat).
LEASE_MS = 10 * 60 * 1000
#: ``include_delayed=True`` runs everything due before this (year 9999, in ms).
FAR_FUTURE_MS = 253_402_300_799_000
#: Heads read per look at the partitions.
HEAD_BATCH = 16


def run_jobs(
    *,
    queue: str | Iterable[str] | None = None,
    task: Task | str | None = None,
    max_jobs: int = DEFAULT_MAX_JOBS,
    include_delayed: bool = False,
    now: datetime | None = None,
) -> list[TaskResult]:
    """Runs the jobs queued in ``LATER["DATABASE"]`` now, one at a time, in this thread
    and on this thread's connection (so inside the caller's transaction, if any),
    until none is left or ``max_jobs`` task calls were made; returns one
    ``TaskResult`` per job that ran, in the order they first ran, each as it
    stands at the end (a job retried within the run appears once).

    Jobs a run makes ready are run by the same run: continuations of finished
    parents, retries due at once, jobs a task enqueues. ``queue``: only these
    queue names (default: every queue with ready jobs). ``task``: only jobs of
    this task (a ``Task`` or its dotted path); the others stay queued, untouched.
    Delayed jobs and retries waiting for their back-off run only when due: by
    now, by ``now`` (an aware datetime; the real now when that is later), or
    whenever with ``include_delayed=True``.
    What is left when ``max_jobs`` is reached stays queued (a task that enqueues
    itself cannot loop forever). Raises ``TypeError``/``ValueError`` naming a bad
    option.
    """
    selection = Selection.of(queue, task)
    run = Run.start(selection, _max_jobs(max_jobs), _due_by(include_delayed, now))
    try:
        run.drain()
    finally:
        run.give_back()
    return list(run.results.values())


# --- the options ---


@dataclass(frozen=True)
class Selection:
    """Which jobs a run takes: queue names (empty: every queue) and a task path."""

    queues: tuple[str, ...] = ()
    task_path: str | None = None

    @classmethod
    def of(cls, queue: str | Iterable[str] | None, task: Task | str | None) -> Selection:
        """The checked options; ``TypeError``/``ValueError`` naming the bad one."""
        return cls(queues=_queue_names(queue), task_path=_task_path(task))

    def wants(self, task_path: str, queue_name: str | None) -> bool:
        """Whether a job of ``task_path`` on ``queue_name`` belongs to this run."""
        if self.task_path is not None and task_path != self.task_path:
            return False
        return not self.queues or queue_name in self.queues


def _queue_names(queue: str | Iterable[str] | None) -> tuple[str, ...]:
    if queue is None:
        return ()
    names = (queue,) if isinstance(queue, str) else tuple(queue)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"run_jobs(queue=...) takes queue names (non-empty strings), got {name!r}"
            )
    if not names:
        raise ValueError("run_jobs(queue=...) got no queue name; leave it out for every queue")
    return names


def _task_path(task: Task | str | None) -> str | None:
    if task is None:
        return None
    if isinstance(task, Task):
        return str(task.module_path)
    if isinstance(task, str) and task:
        return task
    raise TypeError(
        f"run_jobs(task=...) takes a django.tasks.Task or its dotted path, got {task!r}"
    )


def _max_jobs(max_jobs: int) -> int:
    if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
        raise ValueError(f"run_jobs(max_jobs=...) must be an integer >= 1, got {max_jobs!r}")
    return max_jobs


def _due_by(include_delayed: bool, now: datetime | None) -> int | None:
    """The time jobs must be due by (epoch ms), or None for the real now."""
    if now is None:
        return FAR_FUTURE_MS if include_delayed else None
    if include_delayed:
        raise ValueError("run_jobs(): pass include_delayed=True or now=..., not both")
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"run_jobs(now=...) must be an aware datetime, got {now!r}")
    return int(now.timestamp() * 1000)


# --- one run ---


@dataclass
class Run:
    """One :func:`run_jobs` call: who claims, what it holds, what it ran."""

    selection: Selection
    max_jobs: int
    due_by_ms: int | None
    settings: LaterSettings
    stores: Stores
    owner: str
    #: Messages of other tasks claimed on the way, handed back at the end.
    skipped_messages: list[int] = field(default_factory=list)
    #: Partition heads of other tasks or queues, left alone.
    skipped_heads: list[str] = field(default_factory=list)
    #: Partition -> epoch of the partition leases taken (once, at the first look).
    partitions: dict[Partition, int] | None = None
    results: dict[str, TaskResult] = field(default_factory=dict)
    calls: int = 0

    @classmethod
    def start(cls, selection: Selection, max_jobs: int, due_by_ms: int | None) -> Run:
        settings = later_settings()
        return cls(
            selection=selection,
            max_jobs=max_jobs,
            due_by_ms=due_by_ms,
            settings=settings,
            stores=stores_for(settings.database),
            owner=f"later_django.testing:{os.getpid()}:{get_random_string(6)}",
        )

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    def due_by(self) -> int:
        """What is due by this time runs: now, or the run's ``now=`` when later."""
        now = now_ms()
        return now if self.due_by_ms is None else max(now, self.due_by_ms)

    def drain(self) -> None:
        """Runs one job at a time until none is left or ``max_jobs`` calls were made."""
        while self.calls < self.max_jobs:
            promote_all_due(stores=self.stores, namespace=self.namespace, due_by_ms=self.due_by())
            job = self._next_from_queue() or self._next_from_heads()
            if job is None:
                return
            self._run(job)

    def give_back(self) -> None:
        """Hands back the skipped messages and releases the partition leases."""
        if self.skipped_messages:
            self.stores.queue.nack(self.owner, self.skipped_messages)
            self.skipped_messages = []
        if self.partitions:
            self.stores.partitions.release(self.namespace, self.owner, list(self.partitions))
            self.partitions = {}

    def _run(self, job: StartedJob) -> None:
        """The task call and the finish, as a worker makes them (one job per finish)."""
        outcome = run_job(job, manage_connections=False)
        self.calls += 1
        [record], _ = finish_and_continue(
            [outcome],
            stores=self.stores,
            namespace=self.namespace,
            worker_id=self.owner,
            settings=self.settings,
            lease_ms=LEASE_MS,
        )
        if record.stage != stages.RUNNING:  # still running: a fenced, stale outcome
            announce_finished(outcome, record)
        self.results[record.job_id] = task_result(record, job.task)

    # --- the delivery queue ---

    def _next_from_queue(self) -> StartedJob | None:
        """Claims messages one by one until one starts a wanted job; None when none is left."""
        queues = self.selection.queues or self._queues_with_ready_messages()
        while queues:
            messages = self.stores.queue.claim(
                self.namespace, queues, self.owner, LEASE_MS, batch_size=1
            )
            if not messages:
                return None
            if not self._wants_message(messages[0]):
                self.skipped_messages.append(messages[0].sequence)
                continue
            started = start_batch(
                messages,
                stores=self.stores,
                namespace=self.namespace,
                worker_id=self.owner,
                lease_ms=LEASE_MS,
                settings=self.settings,
            )
            if started:
                return started[0]
        return None

    def _queues_with_ready_messages(self) -> list[str]:
        depths = self.stores.dashboard.queue_depths(self.namespace)
        return [name for name, ready in depths if ready > 0]

    def _wants_message(self, message: ClaimedMessage) -> bool:
        """Whether the message's job is of the wanted task; messages that are not jobs
        are left to :func:`start_batch`, which drops them as a worker does."""
        if self.selection.task_path is None:
            return True
        try:
            command = decode_command(message.payload)
        except RecordDecodeError:
            return True
        # The command names the job's task path (payload_type).
        return (
            not isinstance(command, ExecuteJob) or command.payload_type == self.selection.task_path
        )

    # --- partition heads ---

    def _next_from_heads(self) -> StartedJob | None:
        """Starts the first wanted runnable head of any partition; None when none is."""
        held = self._held_partitions()
        if not held:
            return None
        while True:
            claims = self.stores.partitions.claim_heads(
                self.namespace, self.owner, self.due_by(), self.skipped_heads, HEAD_BATCH
            )
            if not claims:
                return None
            for claim in claims:
                if not self._wants_head(claim):
                    self.skipped_heads.append(claim.job_id)
                    continue
                started = self._start_head(claim)
                if started is not None:
                    return started
                self.skipped_heads.append(claim.job_id)  # not runnable: failed or left

    def _held_partitions(self) -> dict[Partition, int]:
        """Takes the leases of every configured partition, once per run."""
        if self.partitions is None:
            partitions = all_partitions(self.settings)
            if not partitions:
                self.partitions = {}
                return self.partitions
            now = now_ms()
            store = self.stores.partitions
            held = store.take(self.namespace, self.owner, partitions, now + LEASE_MS, now)
            store.materialize_heads(self.namespace, held)  # as a worker does after a take
            self.partitions = held
        return self.partitions

    def _wants_head(self, claim: HeadClaim) -> bool:
        record = _head_record(claim)
        return record is None or self.selection.wants(record.task_path, record.queue_name)

    def _start_head(self, claim: HeadClaim) -> StartedJob | None:
        started = start_heads(
            [claim],
            stores=self.stores,
            namespace=self.namespace,
            worker_id=self.owner,
            lease_ms=LEASE_MS,
            settings=self.settings,
        )
        return started[0] if started else None


def _head_record(claim: HeadClaim) -> JobRecord | None:
    """The head's record, or None when it is gone or undecodable (start_heads handles it)."""
    if claim.record is None:
        return None
    try:
        return decode_record(claim.record)
    except RecordDecodeError:
        return None
