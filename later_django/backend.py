"""``LaterBackend``: the ``django.tasks`` backend that stores jobs in the application's database.

::

    TASKS = {"default": {"BACKEND": "later_django.backend.LaterBackend",
                         "QUEUES": ["default", "emails"]}}

``enqueue`` writes the job on the connection of ``LATER["DATABASE"]``, inside
the caller's transaction when there is one, so the job commits or rolls back
with the caller's data; a worker sees it only after the commit. Arguments must
be JSON-compatible, the queue one of ``QUEUES`` (any name when ``QUEUES`` is
``[]``, as Django's settings reference says) and never a name starting with
``__later`` (reserved), the priority a whole number in -100..100 and
``run_after`` an aware datetime; anything else raises before a single row is
written.

``get_result(id)`` gives back the job as it was enqueued: its own queue,
priority, ``run_after`` and backend alias (all stored in the record), so for a
job that has not started ``enqueue(...) == get_result(result.id)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction

from later_django.compat.tasks import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    task_enqueued,
)
from later_django.conf import later_settings
from later_django.core.keys import RESERVED_PREFIX, is_reserved, job_key
from later_django.core.payload import json_compatible
from later_django.core.records import decode_record
from later_django.engine.enqueue import NewJob, enqueue_jobs
from later_django.engine.registry import resolve_task
from later_django.engine.results import task_result
from later_django.exceptions import RecordDecodeError, UnregisteredTaskError
from later_django.storage.stores import stores_for
from later_django.storage.tables import raise_if_tables_missing
from later_django.tasks import LaterTask

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


class LaterBackend(BaseTaskBackend):
    task_class = LaterTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    @property
    def any_queue(self) -> bool:
        """``QUEUES: []``: a task may name any queue (Django: an empty list allows all)."""
        return not self.queues

    def validate_task(self, task: Task) -> None:
        """Django's checks, and a queue name that is not later_django's own: ``InvalidTask``
        for a name starting with ``__later``, whatever ``QUEUES`` says."""
        if isinstance(task.queue_name, str) and is_reserved(task.queue_name):
            raise InvalidTask(
                f"Queue {task.queue_name!r} is not valid: queue names starting with "
                f"{RESERVED_PREFIX!r} are reserved for later_django's own use."
            )
        super().validate_task(task)

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
            run_after_ms=None if run_after is None else _epoch_ms(run_after),
            parent_job_id=parent_job_id,
            run_on=run_on,
        )

    def write_jobs(self, tasks: Sequence[Task], jobs: Sequence[NewJob]) -> list[TaskResult]:
        """Writes ``jobs`` in one transaction; sends ``task_enqueued`` for each on commit.
        Raises ``TablesMissing`` when later_django's migrations were not applied."""
        settings = later_settings()
        try:
            records = enqueue_jobs(
                jobs, stores=stores_for(settings.database), namespace=settings.namespace
            )
        except DatabaseError as error:  # not a context manager: this is every enqueue's path
            raise_if_tables_missing(settings.database, error)
            raise
        results = [task_result(record, task) for record, task in zip(records, tasks, strict=True)]

        def announce() -> None:
            for result in results:
                task_enqueued.send(type(self), task_result=result)

        transaction.on_commit(announce, using=settings.database, robust=True)
        return results

    def enqueue(self, task: Task, args: Sequence[Any], kwargs: dict[str, Any]) -> TaskResult:
        return self.write_jobs([task], [self.new_job(task, args, kwargs)])[0]

    def get_result(self, result_id: str) -> TaskResult:
        """The job ``result_id`` as stored (any ``LaterBackend`` of ``TASKS`` reads every
        job: they share ``LATER["DATABASE"]``); ``TaskResultDoesNotExist`` when there is
        none, or its record cannot be decoded, or its task path is not a ``Task``."""
        settings = later_settings()
        raw = stores_for(settings.database).kv.get(job_key(settings.namespace, str(result_id)))
        if raw is None:
            raise TaskResultDoesNotExist(result_id)
        try:
            record = decode_record(raw)
            task = resolve_task(record.task_path)
        except (RecordDecodeError, UnregisteredTaskError) as error:
            raise TaskResultDoesNotExist(f"{result_id}: {error}") from None
        return task_result(record, task)


def _epoch_ms(moment: datetime) -> int:
    """Whole milliseconds since the epoch, in integers: ``timestamp() * 1000`` is a float,
    and from 2038 on some times come out a millisecond early (08:54:07.398 as ...397.9998)."""
    if moment.tzinfo is None:  # USE_TZ = False: naive datetimes are local time
        moment = moment.astimezone()
    return (moment - _EPOCH) // _MILLISECOND
