"""A job record as django.tasks sees it: a ``TaskResult``.

Stages map to statuses: delayed, waiting, enqueued, requeued -> READY;
running -> RUNNING; success -> SUCCESSFUL (with the return value); failed ->
FAILED (with every attempt's error); cancelled -> FAILED too, its last error a
``later_django.exceptions.JobCancelled`` (django.tasks has no cancelled status).

The result's task is the job's own: the registered task with the queue,
priority, ``run_after`` and backend alias the record holds (what ``.using()``
gave at enqueue), so ``enqueue()`` and ``get_result()`` return equal results
for a job that has not started.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from later_django.compat.tasks import Task, TaskError, TaskResult, TaskResultStatus
from later_django.core import stages
from later_django.core.records import JobRecord

STATUS_OF_STAGE = {
    stages.DELAYED: TaskResultStatus.READY,
    stages.WAITING: TaskResultStatus.READY,
    stages.ENQUEUED: TaskResultStatus.READY,
    stages.REQUEUED: TaskResultStatus.READY,
    stages.RUNNING: TaskResultStatus.RUNNING,
    stages.SUCCESS: TaskResultStatus.SUCCESSFUL,
    stages.FAILED: TaskResultStatus.FAILED,
    stages.CANCELLED: TaskResultStatus.FAILED,
}


def _when(epoch_ms: int | None) -> datetime | None:
    return None if epoch_ms is None else datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def job_task(record: JobRecord, task: Task) -> Task:
    """``task`` (the one registered at ``record.task_path``) as the job was enqueued:
    with the record's queue, priority, ``run_after`` and backend alias.

    ``task`` itself when they already match. Otherwise a copy that is not validated
    again: the job was validated when it was enqueued, and a read must not fail because
    ``TASKS`` changed since (a queue no longer listed, a backend alias removed)."""
    run_after = _when(record.run_after_ms)
    if (
        task.queue_name == record.queue_name
        and task.priority == record.priority
        and task.run_after == run_after
        and task.backend == record.backend
    ):
        return task
    stored: dict[str, Any] = {
        "queue_name": record.queue_name,
        "priority": record.priority,
        "run_after": run_after,
        "backend": record.backend,
    }
    # dataclasses.replace() would run Task.__post_init__, i.e. the backend's validation.
    restored = object.__new__(type(task))
    for each in fields(task):
        value = stored[each.name] if each.name in stored else getattr(task, each.name)
        object.__setattr__(restored, each.name, value)
    return restored


def task_result(record: JobRecord, task: Task) -> TaskResult:
    """The ``TaskResult`` of ``record``, whose registered task is ``task``."""
    result = TaskResult(
        task=job_task(record, task),
        id=record.job_id,
        status=STATUS_OF_STAGE[record.stage],
        enqueued_at=_when(record.enqueued_at_ms or record.created_at_ms),
        started_at=_when(record.started_at_ms),
        finished_at=_when(record.finished_at_ms),
        last_attempted_at=_when(record.last_attempted_at_ms),
        args=list(record.args),
        kwargs=dict(record.kwargs),
        backend=record.backend,
        errors=[
            TaskError(exception_class_path=error.exception_class_path, traceback=error.traceback)
            for error in record.errors
        ],
        worker_ids=list(record.worker_ids),
    )
    if record.stage == stages.SUCCESS:
        object.__setattr__(result, "_return_value", record.return_value)
    return result
