"""The Tasks framework later_django builds on: ``django.tasks`` or its backport.

Django 6.0 and 6.1 ship ``django.tasks``; on Django 5.2 the same API comes from the
``django-tasks`` backport (import name ``django_tasks``, 0.12), installed by the extra
``later-django[django52]``. Every module of later_django imports what it uses of the
framework from here, and so can an application that supports several Django versions::

    from later_django.compat.tasks import task

The differences later_django meets, and how each is met here:

- ``django_tasks`` exports ``Task`` and ``TaskError`` from ``django_tasks.base`` only;
  both are re-exported here under the usual names.
- ``django_tasks`` names two exceptions ``InvalidTaskError`` and
  ``InvalidTaskBackendError``; they are re-exported as ``InvalidTask`` and
  ``InvalidTaskBackend`` (the same classes, so ``except`` clauses catch either name).
- Django 6.0's ``@task`` takes no options beyond its own four, so ``@task(retry=...)``
  (a ``LaterTask`` option) raises ``TypeError`` there; :func:`task` here forwards
  extra options to the backend's ``task_class`` as Django 6.1 and the backport do
  (and gives ``run_after=None``, which 6.0's ``Task`` requires, having no defaults).
- Django logs task events on the logger ``"django.tasks"``, the backport on
  ``"django_tasks"``: :data:`TASKS_LOGGER_NAME` is the one in use.
- The backport connects its signal receivers (the task log lines, and the reset of
  ``task_backends`` when ``TASKS`` is overridden in a test) and its system check of
  every backend only when its app is ready; importing them here makes them work
  without ``"django_tasks"`` in ``INSTALLED_APPS``, as ``django.tasks`` does.

On Django 6 a package may import the backport all the same (Wagtail declares its tasks
with ``django_tasks.task``): the backport's registry then builds backends from ``TASKS``
beside ``django.tasks``', and ``LaterBackend`` answers both with one instance per alias
(see ``later_django.backend``), so such tasks are ``LaterTask``s run like any other.

The same setting, ``TASKS``, configures both; ``TaskResult``, ``TaskContext``, the
three signals and ``BaseTaskBackend`` have the same fields and methods in all three.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

#: Where the Tasks framework is imported from: Django's own package when it has one.
FRAMEWORK = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"

if TYPE_CHECKING or FRAMEWORK == "django.tasks":
    from django.tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task_backends,
    )
    from django.tasks import task as _framework_task
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import DEFAULT_TASK_PRIORITY, TaskError
    from django.tasks.exceptions import (
        InvalidTask,
        InvalidTaskBackend,
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )
    from django.tasks.signals import task_enqueued, task_finished, task_started
else:
    try:
        importlib.import_module("django_tasks")
    except ImportError as error:
        raise ImportError(
            "later_django needs django.tasks (Django 6.0 or newer) or, on Django 5.2, the "
            "django-tasks backport: pip install 'later-django[django52]'"
        ) from error
    from django_tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task_backends,
    )
    from django_tasks import checks as _backport_checks  # noqa: F401  (registers the check)
    from django_tasks import task as _framework_task
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import DEFAULT_TASK_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
    from django_tasks.signals import task_enqueued, task_finished, task_started

#: The logger the framework's own receivers write task events to.
TASKS_LOGGER_NAME = "django.tasks" if FRAMEWORK == "django.tasks" else "django_tasks"

__all__ = [
    "DEFAULT_TASK_BACKEND_ALIAS",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "FRAMEWORK",
    "TASKS_LOGGER_NAME",
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "default_task_backend",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def _forwards_options(decorator: Callable[..., Any]) -> bool:
    """Whether ``decorator`` passes unknown keyword options on to the task class."""
    parameters = inspect.signature(decorator).parameters.values()
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def task(
    function: Callable[..., Any] | None = None,
    *,
    priority: int = DEFAULT_TASK_PRIORITY,
    queue_name: str = DEFAULT_TASK_QUEUE_NAME,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    **options: Any,
) -> Any:
    """``@task`` as Django 6.1 has it, on every supported version.

    Options beyond ``priority``, ``queue_name``, ``backend`` and ``takes_context``
    (``retry`` for a ``LaterBackend``) go to the backend's ``task_class``, which
    rejects an unknown one with ``TypeError``. ``run_after`` raises ``TypeError``: it
    is set per call, with ``.using(run_after=...)``.
    """
    if "run_after" in options:
        raise TypeError("@task(run_after=...): set run_after per call with .using(run_after=...)")
    common: dict[str, Any] = {
        "priority": priority,
        "queue_name": queue_name,
        "backend": backend,
        "takes_context": takes_context,
    }
    if not options or _forwards_options(_framework_task):
        return _framework_task(function, **common, **options)

    def wrapper(func: Callable[..., Any]) -> Task:
        # Django 6.0's Task fields have no defaults: run_after must be given.
        task_class = task_backends[backend].task_class
        return task_class(func=func, run_after=None, **common, **options)

    return wrapper(function) if function is not None else wrapper
