"""Which callables may run: only ``django.tasks.Task`` objects found at their path.

A record names its task by dotted path. The worker imports that path and runs
it only if the object there is a ``Task``; a function, a class or anything else
is refused, so a crafted record cannot make a worker call arbitrary code.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from later_django.compat.tasks import Task
from later_django.exceptions import UnregisteredTaskError

_resolved: dict[str, Task] = {}


def resolve_task(task_path: str) -> Task:
    """The ``Task`` at ``task_path``; ``UnregisteredTaskError`` saying why otherwise.
    Any exception raised while importing the path (a missing module or attribute, or
    an error inside the module) is reported as the import failing, with its class."""
    task = _resolved.get(task_path)
    if task is not None:
        return task
    try:
        found = import_string(task_path)
    except Exception as error:  # a module may raise anything while it is imported
        raise UnregisteredTaskError(
            f"could not import task {task_path!r}: {type(error).__name__}: {error}; "
            "only registered django.tasks.Task objects run"
        ) from None
    if not isinstance(found, Task):
        raise UnregisteredTaskError(
            f"task path {task_path!r} names a {type(found).__name__}, not a registered "
            "django.tasks.Task; only tasks declared with @task run"
        )
    _resolved[task_path] = found
    return found
