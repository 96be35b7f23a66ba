"""``TASKS`` changed for one test: Django caches its task backends and does not reset
them when ``TASKS`` is overridden (no ``setting_changed`` receiver), so this does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from asgiref.local import Local
from django.test import override_settings

from later_django.compat.tasks import task_backends

LATER_BACKEND = "later_django.backend.LaterBackend"


def _forget_backends() -> None:
    # BaseConnectionHandler keeps the settings in a cached property and the backends
    # in a Local: both are built again from TASKS at the next access.
    task_backends.__dict__.pop("settings", None)
    task_backends._settings = None
    task_backends._connections = Local(task_backends.thread_critical)


@contextlib.contextmanager
def tasks_setting(tasks: dict[str, dict[str, Any]]) -> Iterator[None]:
    """``TASKS = tasks`` inside the block, with fresh backends on entry and on exit."""
    try:
        with override_settings(TASKS=tasks):
            _forget_backends()
            yield
    finally:
        _forget_backends()


def any_queue_backends(*aliases: str) -> dict[str, dict[str, Any]]:
    """``TASKS`` with one ``LaterBackend`` per alias, each with ``QUEUES: []``."""
    return {alias: {"BACKEND": LATER_BACKEND, "QUEUES": []} for alias in aliases}
