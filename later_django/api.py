"""Later's own features beyond ``django.tasks``: bulk enqueue, continuations, recurring
jobs, partitions, unique jobs, cancelling jobs, bulk actions on stored jobs, and
pausing queues.

The enqueues write on the connection of ``LATER["DATABASE"]`` and join the caller's
``transaction.atomic()``, like ``Task.enqueue``. Tasks must use a
:class:`~later_django.backend.LaterBackend`. The bulk actions (:func:`retry_failed`,
:func:`cancel_jobs`, :func:`delete_jobs`) and :func:`cancel_many` commit one batch at
a time: call them outside ``atomic()``.

Retained logs (``log``, ``consumer``) are re-exported from :mod:`later_django.logs`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Literal, TypedDict, overload

from django.utils import timezone

from later_django.backend import later_backend_of as _later_backend
from later_django.compat.tasks import Task, TaskResult
from later_django.conf import later_settings
from later_django.core.topics import key_bytes
from later_django.core.unique import DEFAULT_OPTION, check_key
from later_django.engine import fan_in, queue_pause, recurring, recurring_pass, recurring_schedule
from later_django.engine.cancellation import check_cancelled
from later_django.engine.enqueue import CONTINUE_ON
from later_django.engine.job_actions import bulk, one_job, record_checks
from later_django.engine.job_actions.selection import DEFAULT_BATCH_SIZE, BulkOutcome, JobSelection
from later_django.engine.partitions import check_public_topic
from later_django.engine.queue_pause import PausedQueue
from later_django.engine.recurring import RecurringDefinition
from later_django.engine.task_policy import policy_for, unique_for
from later_django.exceptions import (
    JobCancelled,
    ParentNotFound,
    TopicLayoutMismatch,
    TopicNotConfigured,
)
from later_django.logs import Consumer, LogRecord, RetainedLog, StaleLease, consumer, log
from later_django.storage.stores import stores_for
from later_django.worker.task_calls import LaterTaskContext

__all__ = [
    "BulkOutcome",
    "Consumer",
    "JobCancelled",
    "LaterTaskContext",
    "LogRecord",
    "ParentNotFound",
    "PausedQueue",
    "RetainedLog",
    "StaleLease",
    "TopicLayoutMismatch",
    "TopicNotConfigured",
    "after",
    "cancel",
    "cancel_jobs",
    "cancel_many",
    "check_cancelled",
    "consumer",
    "continue_with",
    "delete_jobs",
    "disable_recurring",
    "enable_recurring",
    "enqueue_many",
    "enqueue_to_partition",
    "enqueue_unique",
    "log",
    "pause_queue",
    "paused_queues",
    "remove_recurring",
    "resume_queue",
    "retry_failed",
    "run_recurring_now",
    "schedule_recurring",
]


@overload
def enqueue_many(
    task: Task,
    calls: Iterable[tuple[Sequence[Any], dict[str, Any]]],
    *,
    ids_only: Literal[False] = False,
) -> list[TaskResult]: ...


@overload
def enqueue_many(
    task: Task, calls: Iterable[tuple[Sequence[Any], dict[str, Any]]], *, ids_only: Literal[True]
) -> list[str]: ...


def enqueue_many(
    task: Task, calls: Iterable[tuple[Sequence[Any], dict[str, Any]]], *, ids_only: bool = False
) -> list[TaskResult] | list[str]:
    """Enqueues one job of ``task`` per ``(args, kwargs)`` in ``calls``, in one
    transaction with one statement per table for the whole batch.

    Every call is validated first; one bad argument raises (naming its position)
    and nothing is written. Returns the jobs' ``TaskResult`` values, in order, and
    sends ``task_enqueued`` for each when the transaction commits; with
    ``ids_only=True`` it returns their ids instead and builds no ``TaskResult``, so
    it sends no ``task_enqueued`` either (the lean path for large batches).
    """
    backend = _later_backend(task)
    jobs = backend.new_jobs(task, calls)
    if ids_only:
        return backend.write_job_ids(jobs)
    return backend.write_many(task, jobs)


def continue_with(
    parent_id: str | TaskResult, task: Task, *args: Any, on: str = "success", **kwargs: Any
) -> TaskResult:
    """Enqueues ``task(*args, **kwargs)`` to run after the job ``parent_id`` finishes.

    The child waits in stage ``waiting``. When the parent finishes it is
    enqueued; with ``on="success"`` (the default) a parent that failed makes the
    child fail with the reason ``parent <id> failed``; with ``on="finish"`` it
    runs either way. A child added after its parent finished is enqueued (or
    failed) at once. Many children may wait for one parent (fan-out), and a
    child may be a parent in turn (chains). Raises ``ParentNotFound`` for an
    unknown parent and ``ValueError`` for another ``on``.
    """
    if on not in CONTINUE_ON:
        raise ValueError(f"on must be one of {CONTINUE_ON}, got {on!r}")
    parent_job_id = parent_id.id if isinstance(parent_id, TaskResult) else str(parent_id)
    backend = _later_backend(task)
    job = backend.new_job(task, args, kwargs, parent_job_id=parent_job_id, run_on=on)
    return backend.write_jobs([task], [job])[0]


def after(
    parents: Iterable[str | TaskResult], task: Task, *args: Any, on: str = "success", **kwargs: Any
) -> TaskResult:
    """Enqueues ``task(*args, **kwargs)`` to run once every job of ``parents`` (ids or
    ``TaskResult`` values; duplicates count once) has finished: a fan-in.

    The child waits (``waiting``) until its last parent's finish enqueues it, exactly
    once however many parents finish together. With ``on="success"`` (the default) a
    parent that fails or is cancelled fails the child at once, ``parent <id> failed``
    (and its own such children, in turn); with ``on="finish"`` it runs either way.
    Parents already finished count at once; one parent is :func:`continue_with`.
    Raises ``ParentNotFound`` naming an unknown parent (nothing written),
    ``ValueError`` for no parent or another ``on``, ``TypeError`` for one not in a list.
    """
    ids = fan_in.parent_ids(parents)
    if len(ids) == 1:
        return continue_with(ids[0], task, *args, on=on, **kwargs)
    if on not in CONTINUE_ON:
        raise ValueError(f"on must be one of {CONTINUE_ON}, got {on!r}")
    backend = _later_backend(task)
    job = backend.new_job(task, args, kwargs, run_on=on)
    return backend.write_jobs([task], [dataclasses.replace(job, parent_job_ids=ids)])[0]


def schedule_recurring(
    id: str,
    cron: str,
    task: Task,
    *args: Any,
    sequential: bool = False,
    timezone: str | None = None,
    **kwargs: Any,
) -> RecurringDefinition:
    """Creates or replaces the recurring job ``id``: ``task(*args, **kwargs)`` at each
    tick of ``cron`` (5 fields, or 6 with a trailing seconds field) in ``timezone``
    (an IANA name; ``None`` is UTC). Returns the stored definition.

    Everything is validated before anything is written: the id (1 to 200 letters,
    digits, ``_ . : -``), the cron expression (``ValueError`` naming it and the
    id), the time zone (``ValueError``), the task (a ``LaterBackend`` task, else
    ``InvalidTask``) and the arguments (JSON-compatible, else ``TypeError``). The
    next run is the first tick after now; replacing a definition without changing
    its cron and time zone keeps its next run. With ``sequential=True`` the
    occurrences (and their continuations) run one at a time in the reserved topic
    ``__later_recurring__``, keyed by ``id``. Joins the caller's ``atomic()``.
    """
    recurring.validate_recurring_id(id)
    recurring_schedule.validate_cron(cron, id)
    recurring_schedule.validate_timezone(timezone, id)
    if not isinstance(sequential, bool):
        raise TypeError(f"sequential of recurring job {id!r} must be True or False")
    if not isinstance(task, Task):
        raise TypeError(
            f"recurring job {id!r}: {task!r} is not a django.tasks.Task (declare it with @task)"
        )
    backend = _later_backend(task)
    job = backend.new_job(task, args, kwargs)
    settings = later_settings()
    return recurring.upsert_definition(
        stores=stores_for(settings.database),
        namespace=settings.namespace,
        recurring_id=id,
        cron=cron,
        task_path=job.task_path,
        args=job.args,
        kwargs=job.kwargs,
        timezone=timezone,
        sequential=sequential,
        source=recurring.SOURCE_API,
    )


def remove_recurring(id: str) -> bool:
    """Deletes the recurring job ``id`` (whatever its source); ``True`` if it existed.
    Occurrences already enqueued are not touched. Joins the caller's ``atomic()``.
    A definition from ``LATER["RECURRING"]`` comes back at the next worker start
    unless it is also removed from the settings."""
    settings = later_settings()
    return recurring.delete_definition(
        stores=stores_for(settings.database), namespace=settings.namespace, recurring_id=id
    )


def _set_recurring_enabled(id: str, enabled: bool) -> bool:
    settings = later_settings()
    return recurring.set_enabled(
        stores=stores_for(settings.database),
        namespace=settings.namespace,
        recurring_id=id,
        enabled=enabled,
    )


def disable_recurring(id: str) -> bool:
    """Stops the recurring job ``id`` from enqueueing occurrences until
    :func:`enable_recurring`; ``True`` if it was enabled. Occurrences already enqueued
    are not touched. The state outlives worker restarts, also for a definition from
    ``LATER["RECURRING"]`` (the settings sync keeps it). ``LookupError`` when there is
    no such recurring job. Joins the caller's ``atomic()``."""
    return _set_recurring_enabled(id, False)


def enable_recurring(id: str) -> bool:
    """Lets the disabled recurring job ``id`` run again; ``True`` if it was disabled. Its
    next run is the first tick from now: ticks missed while it was disabled are skipped,
    not caught up. ``LookupError`` when there is no such recurring job. Joins the
    caller's ``atomic()``."""
    return _set_recurring_enabled(id, True)


def run_recurring_now(id: str) -> str:
    """Enqueues one occurrence of the recurring job ``id`` now, outside its schedule
    (its next run is unchanged; a disabled one runs too), and returns the job's id.
    ``LookupError`` when there is no such recurring job. Joins the caller's ``atomic()``."""
    settings = later_settings()
    return recurring_pass.run_occurrence_now(stores_for(settings.database), settings.namespace, id)


def enqueue_to_partition(
    topic: str, key: str | bytes | int, task: Task, *args: Any, **kwargs: Any
) -> TaskResult:
    """Enqueues ``task(*args, **kwargs)`` on the partition of ``topic`` that ``key``
    routes to, behind every job enqueued there before it.

    Jobs of one partition run one at a time in enqueue (sequence) order; jobs
    of different partitions run in parallel. The job gets the partition's next
    sequence in the same transaction (the caller's inside ``atomic()``).
    Raises, writing nothing: ``TopicNotConfigured`` when ``topic`` is not in
    ``LATER["TOPICS"]``, ``ValueError`` for a reserved topic (``__later…``),
    ``TypeError`` for a key that is not str, bytes or int or an argument that is
    not JSON-compatible, ``TopicLayoutMismatch`` when the database records the
    topic with another partition count.
    """
    backend = _later_backend(task)
    check_public_topic(topic, later_settings())
    key_bytes(key)  # TypeError naming a bad key
    job = backend.new_job(task, args, kwargs)
    job = dataclasses.replace(job, topic=topic, partition_key=key)
    return backend.write_jobs([task], [job])[0]


def enqueue_unique(task: Task, key: str, /, *args: Any, **kwargs: Any) -> TaskResult:
    """Enqueues ``task(*args, **kwargs)`` unless a job of ``task`` holding ``key`` is in one
    of the task's ``unique`` stages (default: the live stages); then it writes nothing
    and returns that job's result. The period and stages come from the task's
    ``unique`` option when it has one, else from its ``LATER["TASK_POLICIES"]``
    policy's (their own ``key`` is replaced by ``key``); without either, the key is
    held while the job is live. Race-free: of concurrent enqueues of
    one key, one job is written. Joins the caller's transaction like ``enqueue``."""
    backend = _later_backend(task)
    policy = policy_for(task.module_path, later_settings())
    option = unique_for(task, policy) or DEFAULT_OPTION
    given = dataclasses.replace(option, key=check_key(key, "enqueue_unique's key"))
    return backend.write_jobs([task], [backend.new_job(task, args, kwargs, unique=given)])[0]


def retry_failed(
    *,
    task: Task | str | None = None,
    queue: str | None = None,
    since: datetime | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
) -> BulkOutcome:
    """Enqueues again every failed job (of ``task``, a task or its module path; of
    ``queue``; that failed at or after ``since``, a naive time read in the current
    time zone), as the dashboard's *Retry* does for one: their earlier errors are kept,
    so a job whose retries are used up fails for good at its next error.

    Runs in batches of ``batch_size`` jobs, one transaction each, newest failures
    first: call it outside ``atomic()``. Jobs on a topic partition, and jobs whose
    record could not be decoded, are refused and counted in the outcome. ``dry_run``
    counts what would be retried and writes nothing. Failed jobs past their
    retention are gone and not retried.
    """
    return bulk.retry_selected(
        _selection("failed", task, queue, since),
        **_target(),
        batch_size=batch_size,
        dry_run=dry_run,
    )


#: What :func:`cancel` did (see there).
CANCELLED = record_checks.CANCELLED
REQUESTED = record_checks.REQUESTED
FINISHED = record_checks.FINISHED
MISSING = record_checks.MISSING
UNREADABLE = record_checks.UNREADABLE


def cancel(job_id: str) -> str:
    """Cancels the job ``job_id`` (a ``TaskResult``'s ``id``); returns what it did:

    * ``"cancelled"``: it was delayed, waiting, requeued or enqueued; it is
      ``cancelled`` now and will never start.
    * ``"requested"``: it is running (or waits on a topic partition, or a worker
      claimed its message at this very instant). The worker holding it sets
      ``context.cancelled`` within half a second (:func:`check_cancelled` then
      raises ``JobCancelled`` inside the task), and the job is recorded
      ``cancelled`` when its task returns, whatever it returns.
    * ``"finished"``: it had finished already; nothing changed. ``"missing"``: no
      such job (deleted, or past its retention). ``"unreadable"``: its stored record
      cannot be decoded (the worker that meets it writes it failed).

    A cancelled job's ``get_result()`` is ``FAILED`` with a ``JobCancelled`` error
    (django.tasks has no cancelled status). Its ``on="success"`` continuations fail
    with ``parent <id> cancelled``; its ``on="finish"`` continuations run.
    """
    settings = later_settings()
    return one_job.cancel_job(settings.database, settings.namespace, job_id)


def cancel_many(job_ids: Iterable[str]) -> dict[str, str]:
    """:func:`cancel` for each of ``job_ids``, 500 per transaction; what was done, by id."""
    settings = later_settings()
    return one_job.cancel_many(settings.database, settings.namespace, list(job_ids))


def cancel_jobs(
    stage: str,
    *,
    task: Task | str | None = None,
    queue: str | None = None,
    since: datetime | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
) -> BulkOutcome:
    """Cancels every job of the live ``stage`` (``delayed``, ``waiting``,
    ``enqueued``, ``running`` or ``requeued``; ``ValueError`` otherwise), filtered
    as in :func:`retry_failed`, as :func:`cancel` does for one. The outcome's
    ``requested`` counts the jobs asked to stop (running, or on a partition) among
    ``changed``. An enqueued job whose message a worker claims meanwhile is refused
    (it is starting). Batches as in :func:`retry_failed`."""
    return bulk.cancel_selected(
        _selection(stage, task, queue, since),
        **_target(),
        batch_size=batch_size,
        dry_run=dry_run,
    )


def delete_jobs(
    stage: str,
    *,
    task: Task | str | None = None,
    queue: str | None = None,
    since: datetime | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
) -> BulkOutcome:
    """Deletes every job of ``stage`` (filtered as in :func:`retry_failed`, ``since``
    meaning "entered the stage at or after"), as the dashboard's *Delete* does for
    one: record, index row, schedule entry, and its place among its parent's
    continuations. ``stage`` is one of ``delayed``, ``waiting``, ``requeued``,
    ``success``, ``failed``, ``cancelled`` (``ValueError`` otherwise). A job with continuations
    still waiting for it, and a live job on a topic partition, are refused and
    counted. Batches as in :func:`retry_failed`.
    """
    return bulk.delete_selected(
        _selection(stage, task, queue, since),
        **_target(),
        batch_size=batch_size,
        dry_run=dry_run,
    )


def pause_queue(name: str, *, by: str = "") -> bool:
    """Pauses queue ``name`` for every worker of the namespace, on every host, within
    half a second: no worker claims its messages until :func:`resume_queue`; jobs
    already running finish, and enqueues into it still succeed (the jobs wait). The
    pause is stored, so it survives restarts. ``by`` records who paused it (free
    text, shown by ``later_queue list``). Returns ``False`` when it was already paused.
    Jobs on a topic partition are not paused. ``ValueError`` for a name that cannot
    be a queue (empty, longer than 200 characters, or reserved)."""
    settings = later_settings()
    return queue_pause.pause_queue(stores_for(settings.database), settings.namespace, name, by=by)


def resume_queue(name: str) -> bool:
    """Resumes queue ``name`` and wakes idle workers; returns ``False`` when it was not
    paused."""
    settings = later_settings()
    return queue_pause.resume_queue(stores_for(settings.database), settings.namespace, name)


def paused_queues() -> list[PausedQueue]:
    """The paused queues of the namespace, by name, with when and by whom."""
    settings = later_settings()
    return queue_pause.paused_queues(stores_for(settings.database), settings.namespace)


def _selection(
    stage: str, task: Task | str | None, queue: str | None, since: datetime | None
) -> JobSelection:
    if since is not None and timezone.is_naive(since):
        since = timezone.make_aware(since)
    return JobSelection(
        stage=stage,
        task_path=task.module_path if isinstance(task, Task) else task,
        queue_name=queue,
        since_ms=None if since is None else int(since.timestamp() * 1000),
    )


class _Target(TypedDict):
    using: str
    namespace: str


def _target() -> _Target:
    settings = later_settings()
    return {"using": settings.database, "namespace": settings.namespace}
