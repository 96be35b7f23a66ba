"""Later's own features beyond ``django.tasks``: bulk enqueue and continuations.

Both write on the connection of ``LATER["DATABASE"]`` and join the caller's
``transaction.atomic()``, like ``Task.enqueue``. Tasks must use a
:class:`~later_django.backend.LaterBackend`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.tasks import Task, TaskResult
from django.tasks.exceptions import InvalidTask

from later_django.backend import LaterBackend
from later_django.engine.enqueue import CONTINUE_ON, ParentNotFound

__all__ = ["ParentNotFound", "continue_with", "enqueue_many"]


def _later_backend(task: Task) -> LaterBackend:
    backend = task.get_backend()
    if not isinstance(backend, LaterBackend):
        raise InvalidTask(
            f"task {task.module_path} uses backend {task.backend!r} "
            f"({type(backend).__name__}), not a later_django LaterBackend"
        )
    return backend


def enqueue_many(
    task: Task, calls: Iterable[tuple[Sequence[Any], dict[str, Any]]]
) -> list[TaskResult]:
    """Enqueues one job of ``task`` per ``(args, kwargs)`` in ``calls``, in one
    transaction with one statement per table for the whole batch.

    Every call is validated first; one bad argument raises (naming its position)
    and nothing is written.
    """
    backend = _later_backend(task)
    jobs = []
    for position, call in enumerate(calls):
        try:
            args, kwargs = call
        except (TypeError, ValueError):
            raise TypeError(
                f"enqueue_many call {position} must be an (args, kwargs) pair, got {call!r}"
            ) from None
        try:
            jobs.append(backend.new_job(task, args, kwargs))
        except TypeError as error:
            raise TypeError(f"enqueue_many call {position}: {error}") from None
    return backend.write_jobs([task] * len(jobs), jobs)


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
