"""The one resolver of a task's options: its own (``@task(...)``), else the policy of
``LATER["TASK_POLICIES"]`` for its module path, else the global default.

* at enqueue (:func:`routing`, :func:`unique_for`): queue and priority, the unique
  option (and its key function, imported once per path);
* at execution (:func:`retry_for`, :func:`timeout_seconds_for`): the retry policy
  resolved at a job's first failure, and an attempt's timeout.

The policies are parsed once per ``LATER`` object (``LaterSettings.task_policies``)
and looked up per module path through a cache: no settings are parsed per call.
:func:`policy_key_problems` and :func:`unmatched_policy_keys` are the system
checks' (:mod:`later_django.checks`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string, module_has_submodule

from later_django.compat.tasks import DEFAULT_TASK_PRIORITY, DEFAULT_TASK_QUEUE_NAME, Task
from later_django.conf import LaterSettings
from later_django.core.retry import RetryPolicy
from later_django.core.task_policy import WHERE, TaskPolicies, TaskPolicy
from later_django.core.unique import UniqueOption
from later_django.engine.registry import resolve_task
from later_django.exceptions import UnregisteredTaskError

_key_functions: dict[str, Callable[..., Any]] = {}


def policy_for(path: str, settings: LaterSettings) -> TaskPolicy:
    """The policy of the task at ``path`` (cached per path by ``settings``)."""
    return settings.task_policies.for_path(path)


def routing(task: Task, policy: TaskPolicy) -> tuple[str, int]:
    """``(queue, priority)`` of a job of ``task``: the policy's where the task has
    Django's default (``"default"``, 0), so ``@task(queue_name=...)`` and
    ``.using(...)`` with any other value win; the task's own otherwise."""
    queue: str = task.queue_name
    priority = int(task.priority)
    if policy.queue is not None and queue == DEFAULT_TASK_QUEUE_NAME:
        queue = policy.queue
    if policy.priority is not None and priority == DEFAULT_TASK_PRIORITY:
        priority = policy.priority
    return queue, priority


def own_unique(task: Task) -> UniqueOption | None:
    """The task's own checked ``unique`` option (``@task(unique=...)``), or None."""
    option = getattr(task, "unique", None)
    if option is None:
        return None
    return UniqueOption.from_mapping(option, f"the unique option of task {task.module_path}")


def unique_for(task: Task, policy: TaskPolicy) -> UniqueOption | None:
    """The task's own ``unique`` option, else its policy's (a key function imported
    from its dotted path, once); None: not a unique task."""
    own = own_unique(task)
    if own is not None or policy.unique is None:
        return own
    if policy.unique_key_function is None:
        return policy.unique
    function = key_function(policy.unique_key_function, policy.origin.get("unique", ""))
    return dataclasses.replace(policy.unique, key=function)


def key_function(path: str, entry: str) -> Callable[..., Any]:
    """The callable at ``path`` (cached); ``ImproperlyConfigured`` naming the entry."""
    function = _key_functions.get(path)
    if function is None:
        try:
            function = import_string(path)
        except ImportError as error:
            raise ImproperlyConfigured(
                f"{WHERE}[{entry!r}]['unique']['key'] {path!r} cannot be imported: {error}"
            ) from None
        if not callable(function):
            raise ImproperlyConfigured(
                f"{WHERE}[{entry!r}]['unique']['key'] {path!r} is not callable "
                f"(it is of type {type(function).__name__})"
            )
        _key_functions[path] = function
    return function


def retry_for(task: Task | None, path: str, settings: LaterSettings) -> RetryPolicy | None:
    """The retry policy of a job of the task at ``path``: the task's own
    (``@task(retry=...)``), else its policy's; None: ``LATER["RETRY"]`` applies."""
    raw = getattr(task, "retry", None)
    if raw is not None:
        return RetryPolicy.from_mapping(raw, f"the retry option of task {path}")
    return policy_for(path, settings).retry


def timeout_seconds_for(task: Task, settings: LaterSettings) -> float | None:
    """How long one attempt may run: the task's own ``timeout``, else its policy's
    (``None`` there: no limit), else ``LATER["TIMEOUT"]``; None: no limit."""
    seconds: float | None = getattr(task, "timeout", None)
    if seconds is not None:
        return seconds
    policy = policy_for(task.module_path, settings)
    if "timeout" in policy.sets:
        return policy.timeout
    return settings.timeout_seconds


def policy_key_problems(policies: TaskPolicies) -> list[str]:
    """Errors: a unique key function that cannot be imported or is not callable."""
    problems: list[str] = []
    for key, policy in [*policies.exact.items(), *policies.patterns]:
        if policy.unique_key_function is None:
            continue
        try:
            key_function(policy.unique_key_function, key)
        except ImproperlyConfigured as error:
            problems.append(str(error))
    return problems


def unmatched_policy_keys(policies: TaskPolicies) -> list[str]:
    """Warnings: an exact key that names no task, a pattern that matches none of the
    tasks known now (after each installed app's ``tasks`` module was imported)."""
    messages: list[str] = []
    for key in policies.exact:
        try:
            resolve_task(key)
        except UnregisteredTaskError as error:
            messages.append(f"{WHERE}[{key!r}] names no task: {error}")
    patterns = [key for key, _ in policies.patterns]
    if not patterns:
        return messages
    known, failed = known_task_paths()
    for key in patterns:
        if not any(fnmatch.fnmatchcase(path, key) for path in known):
            messages.append(
                f"{WHERE}[{key!r}] matches none of the {len(known)} tasks imported after "
                f"each installed app's 'tasks' module{failed}; a task declared elsewhere "
                "counts once something imports its module"
            )
    return messages


def known_task_paths() -> tuple[set[str], str]:
    """The module paths of every ``Task`` in an imported module, after importing each
    installed app's ``tasks`` module; and a note naming those that failed to import."""
    failed: list[str] = []
    for config in apps.get_app_configs():
        if module_has_submodule(config.module, "tasks"):
            try:
                import_module(f"{config.name}.tasks")
            except Exception as error:  # an app's module may raise anything
                failed.append(f"{config.name}.tasks ({type(error).__name__}: {error})")
    paths: set[str] = set()
    for module in list(sys.modules.values()):
        for value in list(getattr(module, "__dict__", {}).values()):
            # type(), not isinstance(): a lazy object's __class__ would evaluate it.
            if issubclass(type(value), Task):
                paths.add(value.module_path)
    note = f" (could not import {', '.join(failed)})" if failed else ""
    return paths, note
