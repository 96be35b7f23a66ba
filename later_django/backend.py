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

One instance per alias and configuration in a process, whichever registry asks for
it: ``django.tasks``' ``task_backends`` (one per thread), and the django-tasks
backport's, which a package such as Wagtail imports even on Django 6 (its ``@task``
asks the backport's registry for the backend's ``task_class``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from django.apps import apps
from django.core import checks
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
from later_django.core import stages
from later_django.core.keys import RESERVED_PREFIX, is_reserved, job_key
from later_django.core.payload import json_compatible, json_compatible_call
from later_django.core.records import JobRecord, decode_record, new_job_id
from later_django.core.unique import UniqueOption
from later_django.engine import batch_scope
from later_django.engine.enqueue import NewJob, enqueue_jobs
from later_django.engine.registry import resolve_task
from later_django.engine.results import task_result
from later_django.engine.task_policy import policy_for, routing, unique_for
from later_django.exceptions import RecordDecodeError, UnregisteredTaskError
from later_django.storage.stores import stores_for
from later_django.storage.tables import raise_if_tables_missing
from later_django.tasks import LaterTask

#: Makes one job of a task from (args, kwargs, parent job id, run_on).
JobMaker = Callable[[Sequence[Any], dict[str, Any], str | None, str | None], NewJob]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


class LaterBackend(BaseTaskBackend):
    task_class = LaterTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    #: The live instances by (class, alias, repr of the params they were made from).
    _made: ClassVar[weakref.WeakValueDictionary[tuple[type, str, str], LaterBackend]] = (
        weakref.WeakValueDictionary()
    )
    _made_lock: ClassVar[threading.Lock] = threading.Lock()

    def __new__(cls, alias: str, params: dict[str, Any]) -> LaterBackend:
        """The instance already made for ``alias`` from the same ``params`` while one
        is alive, else a new one: every registry that builds its backends from
        ``TASKS`` (``django.tasks``' per thread, the django-tasks backport's) gets the
        same object. Other params (``TASKS`` overridden) make another instance."""
        key = (cls, alias, repr(params))
        with cls._made_lock:
            backend = cls._made.get(key)
            if backend is None:
                backend = super().__new__(cls)
                cls._made[key] = backend
            return backend

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        """Django's ``__init__``, once per instance (``__new__`` may return one already
        made, which Python initializes again)."""
        if getattr(self, "_initialized", False):
            return
        super().__init__(alias, params)
        self._initialized = True

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """Django's backend checks, and later_django.E018: the backend is configured
        but ``later_django`` is not in ``INSTALLED_APPS`` (no tables, no worker
        command, no admin). Here, not in the app's checks: django.tasks runs every
        configured backend's ``check()``, while the app's checks are registered by
        its ``ready()``, which never runs for an app that is not installed."""
        found = list(super().check(**kwargs))
        if not apps.is_installed("later_django"):
            found.append(
                checks.Error(
                    f"TASKS[{self.alias!r}] uses later_django.backend.LaterBackend, but "
                    "'later_django' is not in INSTALLED_APPS: its tables are never "
                    "migrated, and manage.py has no later_worker to run the jobs.",
                    hint="Add 'later_django' to INSTALLED_APPS, then run manage.py migrate.",
                    id="later_django.E018",
                )
            )
        return found

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
        unique: UniqueOption | None = None,
    ) -> NewJob:
        """Validates ``task`` and its arguments and describes the job to write;
        ``unique`` replaces the task's own ``unique`` option (``api.enqueue_unique``).

        Raises ``InvalidTask`` (queue, priority, run_after) or ``TypeError``
        (an argument that is not JSON-compatible), naming the value.
        """
        self.validate_task(task)
        return self._job_of(task, unique)[0](args, kwargs, parent_job_id, run_on)

    def new_jobs(
        self, task: Task, calls: Iterable[tuple[Sequence[Any], dict[str, Any]]]
    ) -> list[NewJob]:
        """:meth:`new_job` for every ``(args, kwargs)`` of ``calls``, ``task`` validated
        once (what ``enqueue_many`` writes). ``TypeError`` names the call's position
        (a call that is not an ``(args, kwargs)`` pair, or a value JSON cannot hold)."""
        self.validate_task(task)
        job_of, unique = self._job_of(task)
        # Without a unique option every job is the first with other arguments.
        template = None if unique else job_of((), {}, None, None)
        jobs = []
        for position, call in enumerate(calls):
            try:
                args, kwargs = call
            except (TypeError, ValueError):
                raise TypeError(
                    f"enqueue_many call {position} must be an (args, kwargs) pair, got {call!r}"
                ) from None
            try:
                if template is None:
                    jobs.append(job_of(args, kwargs, None, None))
                else:
                    jobs.append(template.with_arguments(*json_compatible_call(args, kwargs)))
            except TypeError as error:
                raise TypeError(f"enqueue_many call {position}: {error}") from None
        return jobs

    def _job_of(self, task: Task, unique: UniqueOption | None = None) -> tuple[JobMaker, bool]:
        """A maker of ``task``'s jobs (validated already), and whether they are unique:
        what every job of the task shares is worked out once, the arguments checked per
        call. Queue, priority and the unique option are the task's own, else its
        ``LATER["TASK_POLICIES"]`` policy's (``engine.task_policy``). ``unique``: the
        option to apply instead."""
        run_after = task.run_after
        policy = policy_for(task.module_path, later_settings())
        if unique is None:
            unique = unique_for(task, policy)
        queue_name, priority = routing(task, policy)
        if queue_name != task.queue_name and self.queues and queue_name not in self.queues:
            raise InvalidTask(
                f"Queue {queue_name!r} (LATER['TASK_POLICIES'][{policy.origin['queue']!r}] "
                f"for task {task.module_path}) is not in TASKS[{self.alias!r}]['QUEUES'] "
                f"{sorted(self.queues)}."
            )
        where = f"by the unique option of task {task.module_path}"
        shared = {
            "task_path": task.module_path,
            "queue_name": queue_name,
            # validate_task accepts any whole number (7.0, True); store it as an int.
            "priority": priority,
            "backend": self.alias,
            "run_after_ms": None if run_after is None else _epoch_ms(run_after),
        }

        def job_of(
            args: Sequence[Any],
            kwargs: dict[str, Any],
            parent_job_id: str | None,
            run_on: str | None,
        ) -> NewJob:
            checked_args = json_compatible(list(args), "args")
            checked_kwargs = json_compatible(dict(kwargs), "kwargs")
            return NewJob(
                args=checked_args,
                kwargs=checked_kwargs,
                parent_job_id=parent_job_id,
                run_on=run_on,
                unique=None
                if unique is None
                else unique.key_for(checked_args, checked_kwargs, where),
                job_id=None if unique is None else new_job_id(),
                **shared,
            )

        return job_of, unique is not None

    def write_jobs(self, tasks: Sequence[Task], jobs: Sequence[NewJob]) -> list[TaskResult]:
        """Writes ``jobs`` in one transaction; sends ``task_enqueued`` for each on commit.
        Raises ``TablesMissing`` when later_django's migrations were not applied."""
        settings = later_settings()
        records = self._write(jobs, settings.database, settings.namespace)
        results = [task_result(record, task) for record, task in zip(records, tasks, strict=True)]
        self._announce_on_commit(results, jobs, settings.database)
        return results

    def write_many(self, task: Task, jobs: Sequence[NewJob]) -> list[TaskResult]:
        """:meth:`write_jobs` of jobs that are all ``task``'s, made by :meth:`new_jobs`
        (``enqueue_many``): the same results and signals, built faster (see
        :func:`_task_results`)."""
        settings = later_settings()
        records = self._write(jobs, settings.database, settings.namespace)
        results = _task_results(records, task)
        self._announce_on_commit(results, jobs, settings.database)
        return results

    def _announce_on_commit(
        self, results: list[TaskResult], jobs: Sequence[NewJob], database: str
    ) -> None:
        """Sends ``task_enqueued`` when the transaction commits for each of ``results``
        (those of ``jobs``) that was enqueued: a unique job's enqueue that found its
        key held returns the holder, which is not."""
        enqueued = [
            result
            for result, job in zip(results, jobs, strict=True)
            if job.job_id is None or result.id == job.job_id
        ]

        def announce() -> None:
            for result in enqueued:
                task_enqueued.send(type(self), task_result=result)

        transaction.on_commit(announce, using=database, robust=True)

    def write_job_ids(self, jobs: Sequence[NewJob]) -> list[str]:
        """Writes ``jobs`` in one transaction and returns their ids: no ``TaskResult`` is
        built and no ``task_enqueued`` sent (``enqueue_many(..., ids_only=True)``)."""
        settings = later_settings()
        return [
            record.job_id for record in self._write(jobs, settings.database, settings.namespace)
        ]

    @staticmethod
    def _write(jobs: Sequence[NewJob], database: str, namespace: str) -> list[JobRecord]:
        try:
            records = enqueue_jobs(jobs, stores=stores_for(database), namespace=namespace)
        except DatabaseError as error:  # not a context manager: this is every enqueue's path
            raise_if_tables_missing(database, error)
            raise
        batch_scope.note(records)
        return records

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


#: ``TaskResult``'s fields, in order, as :func:`_task_results` sets them; with
#: another framework's (other fields) every result is built by its constructor.
_RESULT_FIELDS = (
    "task",
    "id",
    "status",
    "enqueued_at",
    "started_at",
    "finished_at",
    "last_attempted_at",
    "args",
    "kwargs",
    "backend",
    "errors",
    "worker_ids",
    "_return_value",
)
_COPY_RESULTS = tuple(each.name for each in fields(TaskResult)) == _RESULT_FIELDS
#: The fields each copy sets from its own record; the rest are the first result's.
_OWN_FIELDS = frozenset({"id", "args", "kwargs", "errors", "worker_ids"})


def _task_results(records: Sequence[JobRecord], task: Task) -> list[TaskResult]:
    """``task_result(record, task)`` for each of ``records`` (all ``task``'s jobs).

    ``task_result`` builds the first result of each kind (stage, times, queue,
    priority, ``run_after``, backend: a batch has one or two kinds); the others are
    copies of it with their own id and arguments, made without ``TaskResult``'s
    ``__init__`` (a frozen dataclass: one ``object.__setattr__`` per field) and its
    ``__post_init__``, whose JSON normalization the stored arguments (JSON-compatible,
    checked at enqueue) do not need. A record with errors, workers or a return value
    gets its own ``task_result``."""
    if not _COPY_RESULTS:
        return [task_result(record, task) for record in records]
    results: list[TaskResult] = []
    #: kind -> the first result's (field, value) pairs but its own fields, read once.
    kinds: dict[tuple[Any, ...], list[tuple[str, Any]]] = {}
    new, put = object.__new__, object.__setattr__
    for record in records:
        if record.errors or record.worker_ids or record.stage == stages.SUCCESS:
            results.append(task_result(record, task))
            continue
        kind = (
            record.stage,
            record.enqueued_at_ms or record.created_at_ms,
            record.started_at_ms,
            record.finished_at_ms,
            record.last_attempted_at_ms,
            record.queue_name,
            record.priority,
            record.run_after_ms,
            record.backend,
        )
        shared = kinds.get(kind)
        if shared is None:
            first = task_result(record, task)
            kinds[kind] = [
                (name, getattr(first, name)) for name in _RESULT_FIELDS if name not in _OWN_FIELDS
            ]
            results.append(first)
            continue
        result = new(TaskResult)
        for name, value in shared:
            put(result, name, value)
        put(result, "id", record.job_id)
        put(result, "args", list(record.args))
        put(result, "kwargs", dict(record.kwargs))
        put(result, "errors", [])
        put(result, "worker_ids", [])
        results.append(result)
    return results


def _epoch_ms(moment: datetime) -> int:
    """Whole milliseconds since the epoch, in integers: ``timestamp() * 1000`` is a float,
    and from 2038 on some times come out a millisecond early (08:54:07.398 as ...397.9998)."""
    if moment.tzinfo is None:  # USE_TZ = False: naive datetimes are local time
        moment = moment.astimezone()
    return (moment - _EPOCH) // _MILLISECOND


def later_backend_of(task: Task) -> LaterBackend:
    """``task``'s backend; ``InvalidTask`` naming it when it is not a ``LaterBackend``."""
    backend = task.get_backend()
    if not isinstance(backend, LaterBackend):
        raise InvalidTask(
            f"task {task.module_path} uses backend {task.backend!r} "
            f"({type(backend).__name__}), not a later_django LaterBackend"
        )
    return backend
