"""The job a log record is about: the fields every job log record carries.

later_django passes them as ``extra`` on its own records about a job
(:func:`job_fields`). While a job's task runs, and while its ``task_finished``
signal is sent, they are also the *current job* of that thread
(:func:`job_context`), so :class:`JobContextFilter` can add them to records
that others write then: the task's own log lines, Django's ``django.tasks``
lines. Attach the filter to a handler (a logger's filters see only the records
logged on that very logger) in ``LOGGING``; docs/observability.md has an example
with a JSON formatter.

Holding the current job costs one ``ContextVar.set`` and ``reset`` per job: no
formatting happens unless a record is written.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from later_django.core.records import JobRecord

#: The names of the job fields on a log record: job id, task path, queue name,
#: attempt number (1 for the first run), and the attempt's duration in seconds
#: (None while the task runs, or where it is not known).
FIELDS: tuple[str, ...] = ("job_id", "task_path", "queue_name", "attempt", "duration")

_current: ContextVar[dict[str, Any] | None] = ContextVar("later_django_job", default=None)


def job_fields(record: JobRecord, duration: float | None = None) -> dict[str, Any]:
    """The :data:`FIELDS` of ``record`` (as ``extra`` for a log call); ``duration``
    is rounded to the microsecond."""
    return {
        "job_id": record.job_id,
        "task_path": record.task_path,
        "queue_name": record.queue_name,
        "attempt": record.attempts,
        "duration": None if duration is None else round(duration, 6),
    }


@contextlib.contextmanager
def job_context(fields: dict[str, Any]) -> Iterator[None]:
    """``fields`` are the current job of this thread (and of this ``asyncio`` task)
    inside the block; the previous one, usually none, again after it."""
    token = _current.set(fields)
    try:
        yield
    finally:
        _current.reset(token)


def current_job() -> dict[str, Any] | None:
    """The fields of the current job, or None outside a job."""
    return _current.get()


class JobContextFilter(logging.Filter):
    """Gives every record the :data:`FIELDS`: those of the current job where the
    record has none of its own (a record later_django wrote keeps its ``extra``),
    None outside a job, so a format string or a JSON formatter can always name
    them. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _current.get() or {}
        for name in FIELDS:
            if not hasattr(record, name):
                setattr(record, name, fields.get(name))
        return True
