"""A job record as django.tasks sees it: a ``TaskResult``.

Stages map to statuses: delayed, waiting, enqueued, requeued -> READY;
running -> RUNNING; success -> SUCCESSFUL (with the return value); failed ->
FAILED (with every attempt's error).
"""

from __future__ import annotations

from datetime import UTC, datetime

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
}


def _when(epoch_ms: int | None) -> datetime | None:
    return None if epoch_ms is None else datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def task_result(record: JobRecord, task: Task, backend_alias: str) -> TaskResult:
    result = TaskResult(
        task=task,
        id=record.job_id,
        status=STATUS_OF_STAGE[record.stage],
        enqueued_at=_when(record.enqueued_at_ms or record.created_at_ms),
        started_at=_when(record.started_at_ms),
        finished_at=_when(record.finished_at_ms),
        last_attempted_at=_when(record.last_attempted_at_ms),
        args=list(record.args),
        kwargs=dict(record.kwargs),
        backend=backend_alias,
        errors=[
            TaskError(exception_class_path=error.exception_class_path, traceback=error.traceback)
            for error in record.errors
        ],
        worker_ids=list(record.worker_ids),
    )
    if record.stage == stages.SUCCESS:
        object.__setattr__(result, "_return_value", record.return_value)
    return result
