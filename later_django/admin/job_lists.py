"""The job list of a stage: index rows, and for ``enqueued`` the delivery queue first.

Queued jobs that are not on a partition have no index row: their unclaimed
delivery messages (read undecoded by
:meth:`~later_django.storage.job_index.JobIndexStore.queued_messages`) are
decoded here into the rows of the ``enqueued`` list, newest first, followed by
the partitioned queued jobs' index rows.

Cursor forms of the ``enqueued`` list: ``q:<sequence>`` (in the delivery
queue, before that message), ``i`` (the start of the index rows, after the
queue), ``i:<stage_date_ms>:<job_id>`` (in the index rows, after that row);
other stages use the index forms only.
"""

from __future__ import annotations

from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.stages import ENQUEUED
from later_django.exceptions import RecordDecodeError
from later_django.storage.job_index import (
    INDEX_CURSOR,
    QueuedMessage,
)
from later_django.storage.ports import JobIndexPort
from later_django.storage.types import JobIndexPage, JobIndexRow

_QUEUE_CURSOR = "q:"


def list_by_stage(
    index: JobIndexPort, namespace: str, stage: str, cursor: str | None = None, limit: int = 50
) -> JobIndexPage:
    """A page of at most ``limit`` jobs in ``stage``, most recently transitioned first.

    ``enqueued`` lists the delivery queue's unclaimed job messages of the
    namespace first (newest first by queue sequence; messages that are not jobs
    take a place in the page but are not listed), then the partitioned jobs'
    index rows. ``cursor`` is opaque and exclusive (``ValueError`` when it is
    not one of this list's); ``next_cursor`` is ``None`` when nothing follows.
    """
    if limit < 1:
        return JobIndexPage(items=[], next_cursor=None)
    if stage != ENQUEUED or (cursor is not None and not cursor.startswith(_QUEUE_CURSOR)):
        return index.job_index_list_by_stage(namespace, stage, cursor, limit)
    before = None if cursor is None else _parse_queue_cursor(cursor)
    return _queued_then_indexed(index, namespace, before, limit)


def _queued_then_indexed(
    index: JobIndexPort, namespace: str, before_sequence: int | None, limit: int
) -> JobIndexPage:
    """Queue messages before ``before_sequence``; once the queue is exhausted the
    page is filled with partitioned jobs' index rows."""
    queued = index.queued_messages(namespace, before_sequence, limit + 1)
    page = queued[:limit]
    items = [row for row in map(queued_job_row, page) if row is not None]
    if len(queued) > limit:
        return JobIndexPage(items, f"{_QUEUE_CURSOR}{page[-1].sequence}")
    # The queue is exhausted: the rest of the page comes from the index.
    room = limit - len(items)
    if room == 0:
        # A full page of jobs: the index rows start the next page, if there are any.
        peek = index.job_index_list_by_stage(namespace, ENQUEUED, None, 1)
        return JobIndexPage(items, INDEX_CURSOR if peek.items else None)
    rest = index.job_index_list_by_stage(namespace, ENQUEUED, None, room)
    return JobIndexPage([*items, *rest.items], rest.next_cursor)


def queued_job_row(message: QueuedMessage) -> JobIndexRow | None:
    """The ``enqueued`` row of a queued job message, or ``None`` for any other message."""
    try:
        command = decode_command(message.payload)
    except RecordDecodeError:
        return None
    if not isinstance(command, ExecuteJob):
        return None
    return JobIndexRow(
        job_id=command.job_id,
        payload_type=command.payload_type,
        stage=ENQUEUED,
        stage_date_ms=message.available_at_ms,
        revision=0,
        created_at_ms=message.available_at_ms,
    )


def _parse_queue_cursor(cursor: str) -> int:
    try:
        return int(cursor.removeprefix(_QUEUE_CURSOR))
    except ValueError:
        raise ValueError(f"not a job-list cursor: {cursor!r}") from None
