"""``LaterBackend``: the ``django.tasks`` backend that stores jobs in the application's database.

::

    TASKS = {"default": {"BACKEND": "later_django.backend.LaterBackend",
                         "QUEUES": ["default", "emails"]}}

``enqueue`` writes the job on the connection of ``LATER["DATABASE"]``, inside
the caller's transaction when there is one, so the job commits or rolls back
with the caller's data; a worker sees it only after the commit. Arguments must
be JSON-compatible, the queue one of ``QUEUES``, the priority a whole number in
-100..100 and ``run_after`` an aware datetime; anything else raises before a
single row is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from later_django.compat.tasks import (
    BaseTaskBackend,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    task_enqueued,
)
from later_django.conf import later_settings
from later_django.core.keys import job_key
from later_django.core.payload import json_compatible
from later_django.core.records import decode_record
from later_django.engine.enqueue import NewJob, enqueue_jobs
from later_django.engine.registry import resolve_task
from later_django.engine.results import task_result
from later_django.exceptions import RecordDecodeError, UnregisteredTaskError
from later_django.storage.stores import stores_for
from later_django.tasks import LaterTask


class LaterBackend(BaseTaskBackend):
    task_class = LaterTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def new_job(
        self,
        task: Task,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        *,
        parent_job_id: str | None = None,
        run_on: str | None = None,
    ) -> NewJob:
        """Validates ``task`` and its arguments and describes the job to write.

        Raises ``InvalidTask`` (queue, priority, run_after) or ``TypeError``
        (an argument that is not JSON-compatible), naming the value.
        """
        self.validate_task(task)
        run_after = task.run_after
        return NewJob(
            task_path=task.module_path,
            args=json_compatible(list(args), "args"),
            kwargs=json_compatible(dict(kwargs), "kwargs"),
            queue_name=task.queue_name,
            # validate_task accepts any whole number (7.0, True); store it as an int.
            priority=int(task.priority),
            backend=self.alias,
            run_after_ms=None if run_after is None else int(run_after.timestamp() * 1000),
            parent_job_id=parent_job_id,
            run_on=run_on,
        )

    def write_jobs(self, tasks: Sequence[Task], jobs: Sequence[NewJob]) -> list[TaskResult]:
        """Writes ``jobs`` in one transaction; sends ``task_enqueued`` for each on commit."""
        settings = later_settings()
        records = enqueue_jobs(
            jobs, stores=stores_for(settings.database), namespace=settings.namespace
        )
        results = [
            task_result(record, task, self.alias)
            for record, task in zip(records, tasks, strict=True)
        ]

        def announce() -> None:
            for result in results:
                task_enqueued.send(type(self), task_result=result)

        transaction.on_commit(announce, using=settings.database, robust=True)
        return results

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: dict[str, Any]) -> TaskResult:
        return self.write_jobs([task], [self.new_job(task, args, kwargs)])[0]

    def get_result(self, result_id: str) -> TaskResult:
        settings = later_settings()
        raw = stores_for(settings.database).kv.get(job_key(settings.namespace, str(result_id)))
        if raw is None:
            raise TaskResultDoesNotExist(result_id)
        try:
            record = decode_record(raw)
            task = resolve_task(record.task_path)
        except (RecordDecodeError, UnregisteredTaskError) as error:
            raise TaskResultDoesNotExist(f"{result_id}: {error}") from None
        return task_result(record, task, self.alias)
