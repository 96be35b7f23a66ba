"""The values starting and finishing share: the job a worker started
(:class:`StartedJob`, under a :class:`HeldPartition` when it came from a partition
head), what running it gave (:class:`Outcome`), who writes (:class:`WorkerArgs`), a
task's timeout and retry policy, and the error recorded for an attempt whose worker
lost it (``WorkerLost``).

Values and lookups: nothing here writes (only :meth:`WorkerArgs.with_exact_cancels`
reads, the cancel requests of a batch by key).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from later_django.compat.tasks import Task
from later_django.conf import LaterSettings
from later_django.core.records import JobError, JobRecord
from later_django.core.retry import RetryPolicy
from later_django.engine import cancellation
from later_django.engine.cancellation import CancelFlag, Requests
from later_django.engine.registry import resolve_task
from later_django.engine.task_policy import retry_for, timeout_seconds_for
from later_django.exceptions import UnregisteredTaskError, WorkerLost, class_path
from later_django.storage.partitions import Partition
from later_django.storage.stores import Stores


@dataclass(frozen=True)
class HeldPartition:
    """The partition lease a job started from a partition head runs under."""

    topic: str
    partition_id: int
    epoch: int

    @property
    def partition(self) -> Partition:
        return (self.topic, self.partition_id)

    @property
    def fence(self) -> tuple[str, int, int]:
        """What the partition fence checks: ``(topic, partition_id, epoch)``."""
        return (self.topic, self.partition_id, self.epoch)


@dataclass
class StartedJob:
    """A job written ``running`` by this worker, ready to be called. It came either
    from a delivery message (``sequence``) or from a partition head (``held``, the
    partition lease it runs under); exactly one of the two is set. ``cancel`` is
    set once its cancel is requested (the task's ``context.cancelled``)."""

    record: JobRecord
    task: Task
    sequence: int | None = None
    held: HeldPartition | None = None
    cancel: CancelFlag = field(default_factory=CancelFlag, compare=False, repr=False)
    #: When the attempt times out (epoch ms), or None: no timeout.
    deadline_ms: int | None = None
    #: Where the job's parents' records are read from (``context.parent_results``);
    #: None: nowhere (a child's read then fails naming why).
    stores: Stores | None = field(default=None, compare=False, repr=False)

    @property
    def partition(self) -> Partition | None:
        return None if self.held is None else self.held.partition

    @property
    def epoch(self) -> int | None:
        return None if self.held is None else self.held.epoch


@dataclass
class Outcome:
    """What running a job gave: a JSON-compatible return value, or an error.

    With an error, ``exception`` is the exception raised (kept in memory only, until
    the outcome is announced, so log lines can carry its traceback), and
    ``retryable`` False fails the job at once whatever its retry policy (a
    programming error such as a return value JSON cannot hold: running it again
    would repeat its side effects and fail the same way).

    Its job is written ``cancelled`` instead, whatever it holds, once the job's
    cancel flag (``started.cancel``) is set or when the error is ``JobCancelled``.
    """

    started: StartedJob
    return_value: Any = None
    error: JobError | None = None
    exception: BaseException | None = None
    retryable: bool = True
    #: How long the task ran (from its call to its return or raise).
    seconds: float = 0.0


@dataclass(frozen=True)
class WorkerArgs:
    """Who writes, where, and how: the arguments every start and finish shares."""

    stores: Stores
    namespace: str
    worker_id: str
    lease_ms: int
    settings: LaterSettings
    #: The cancel requests the worker last read: such a job is cancelled, not started.
    cancels: Requests = cancellation.NONE

    def with_exact_cancels(self, job_ids: Sequence[str]) -> WorkerArgs:
        """Itself, or, when its requests were cut off at the poll's limit, a copy that
        knows exactly which of ``job_ids`` are requested (read by key)."""
        if self.cancels.complete:
            return self
        requested = cancellation.requested_among(self.stores, self.namespace, job_ids)
        return dataclasses.replace(self, cancels=Requests(dict.fromkeys(requested)))


def task_timeout_ms(task: Task, settings: LaterSettings) -> int | None:
    """How long one attempt of ``task`` may run: its ``timeout`` option, else its
    ``LATER["TASK_POLICIES"]`` policy's, else ``LATER["TIMEOUT"]``; None: no limit
    (:func:`~later_django.engine.task_policy.timeout_seconds_for`)."""
    seconds = timeout_seconds_for(task, settings)
    return None if seconds is None else int(seconds * 1000)


def attempt_deadline(task: Task, now: int, settings: LaterSettings) -> int | None:
    timeout = task_timeout_ms(task, settings)
    return None if timeout is None else now + timeout


def task_retry_policy(task: Task, settings: LaterSettings) -> RetryPolicy | None:
    """The task's own retry policy (``@task(retry={...})`` on a ``LaterTask``), else
    its ``LATER["TASK_POLICIES"]`` policy's; None: ``LATER["RETRY"]`` applies."""
    return retry_for(task, task.module_path, settings)


def policy_or_none(record: JobRecord, settings: LaterSettings) -> RetryPolicy | None:
    """:func:`task_retry_policy` of the record's task; of its path's policy alone when
    that path names no task."""
    try:
        task: Task | None = resolve_task(record.task_path)
    except UnregisteredTaskError:
        task = None
    return retry_for(task, record.task_path, settings)


def worker_lost(record: JobRecord, now: int, why: str) -> JobError:
    """The error recorded for an attempt whose worker stopped holding its lease."""
    return attempt_error(WorkerLost, record, now, why)


def attempt_error(kind: type[BaseException], record: JobRecord, now: int, why: str) -> JobError:
    return JobError(
        exception_class_path=class_path(kind),
        traceback=why,
        at_ms=now,
        attempt=record.attempts,
    )
