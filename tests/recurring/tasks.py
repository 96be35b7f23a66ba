"""Tasks the recurring tests schedule; real ``later_worker`` subprocesses run them too.

Each occurrence reads its own job record (through its ``TaskContext``) to learn
the tick it stands for (``run_after_ms``) and its recurring id, and writes one
JSON line to the file named by its first argument.
"""

from __future__ import annotations

import time

from later_django.compat.tasks import TaskContext, task
from later_django.conf import later_settings
from later_django.core.keys import job_key
from later_django.core.records import decode_record
from later_django.storage.stores import stores_for
from tests.worker.tasks import append_line


def own_record(context: TaskContext):  # type: ignore[no-untyped-def]
    settings = later_settings()
    raw = stores_for(settings.database).kv.get(job_key(settings.namespace, context.task_result.id))
    return decode_record(raw)


@task(takes_context=True)
def record_tick(context: TaskContext, path: str, label: str) -> int:
    """Writes ``{"label", "tick", "recurring_id", "job_id"}`` and returns the tick."""
    record = own_record(context)
    append_line(
        path,
        {
            "label": label,
            "event": "run",
            "tick": record.run_after_ms,
            "recurring_id": record.recurring_id,
            "job_id": record.job_id,
        },
    )
    return record.run_after_ms


@task(takes_context=True)
def slow_tick(context: TaskContext, path: str, seconds: float) -> int:
    """Writes a ``start`` line, sleeps ``seconds`` (longer than the period), writes ``end``."""
    record = own_record(context)
    entry = {"tick": record.run_after_ms, "job_id": record.job_id, "topic": record.topic}
    append_line(path, {**entry, "event": "start"})
    time.sleep(seconds)
    append_line(path, {**entry, "event": "end"})
    return record.run_after_ms


@task
def plain(value: int) -> int:
    return value
