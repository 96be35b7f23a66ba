"""The job list of a stage: index rows, and for ``enqueued`` the delivery queue first;
unfiltered pages, pages filtered by task, queue or error from the filter indexes
(:func:`filtered_page`), and the other filtered pages (a task prefix, any filter of
the ``enqueued`` list) found by a walk capped at a number of rows.

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

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.stages import ENQUEUED
from later_django.engine.job_actions.selection import QUEUE_CURSOR, JobSelection
from later_django.exceptions import RecordDecodeError
from later_django.storage.job_filters import INDEX_CURSOR, stage_cursor
from later_django.storage.job_index import QueuedMessage
from later_django.storage.ports.job_index import JobIndexPort
from later_django.storage.types import IndexFilters, JobIndexPage, JobIndexRow

#: Rows read per statement while a filtered list looks for matches.
SCAN_CHUNK = 500

#: Of a chunk of rows, those a filter keeps (it may read their records, once per chunk).
RowFilter = Callable[[list[JobIndexRow]], list[JobIndexRow]]
#: One listed position: its row (``None`` for a queue message that is no job) and the
#: cursor that resumes the list after it.
_Position = tuple[JobIndexRow | None, str]


@dataclass(frozen=True)
class ScannedPage:
    """A page of a (possibly filtered) list. ``scanned`` rows were looked at; when the
    walk stopped at its cap before the page was full, ``stopped_at`` is the cursor
    that goes on after the last row looked at (``None`` otherwise)."""

    items: list[JobIndexRow]
    next_cursor: str | None
    scanned: int
    stopped_at: str | None = None


def list_by_stage(
    index: JobIndexPort, namespace: str, stage: str, cursor: str | None = None, limit: int = 50
) -> JobIndexPage:
    """A page of at most ``limit`` jobs in ``stage``, most recently transitioned first.

    ``enqueued`` lists the delivery queue's unclaimed job messages of the
    namespace first (newest first by queue sequence; messages that are not jobs
    take a place in the page but are not listed), then the partitioned jobs'
    index rows. ``cursor`` is opaque and exclusive (``ValueError`` when it is
    not one of this list's); ``next_cursor`` is ``None`` when nothing follows.
    One or two statements of ``limit + 1`` rows.
    """
    page = scan_stage(index, namespace, JobSelection(stage), cursor, limit)
    return JobIndexPage(page.items, page.next_cursor)


def answered_by_index(selection: JobSelection) -> bool:
    """Whether the filter indexes answer the list: a task (exact), queue or error
    filter, with no task prefix, on a stage other than ``enqueued`` (whose queued
    jobs are delivery messages, looked at one by one)."""
    if selection.stage == ENQUEUED or selection.task_prefix is not None:
        return False
    return _index_filters(selection).columns() != {}


def _index_filters(selection: JobSelection) -> IndexFilters:
    return IndexFilters(selection.task_path, selection.queue_name, selection.error_class)


def filtered_page(
    index: JobIndexPort, namespace: str, selection: JobSelection, cursor: str | None, limit: int
) -> ScannedPage:
    """A page of the list :func:`answered_by_index` serves: one keyset walk of a
    filter index (the time range too: ``until_ms`` as the first cursor, ``since_ms``
    in the statement), whose cost is the page however few jobs match; no cap."""
    if cursor is None or cursor == INDEX_CURSOR:
        cursor = selection.first_cursor()
    page = index.job_index_list_filtered(
        namespace, selection.stage, _index_filters(selection), cursor, limit, selection.since_ms
    )
    return ScannedPage(page.items, page.next_cursor, len(page.items))


def scan_stage(
    index: JobIndexPort,
    namespace: str,
    selection: JobSelection,
    cursor: str | None,
    limit: int,
    keep: RowFilter | None = None,
    scan_cap: int | None = None,
) -> ScannedPage:
    """Up to ``limit`` jobs of ``selection.stage`` that ``selection``'s task and time
    filters and then ``keep`` (the record filters) pass, newest first, after ``cursor``.

    Bounded: the time range of index rows is served by the index (the walk starts
    at ``until_ms`` and ends at ``since_ms``), so an unfiltered list, or one
    filtered by time alone, reads ``limit + 1`` rows in one statement. Any other
    filter (task, record filters, time over the queue's messages) is answered by
    looking at rows, :data:`SCAN_CHUNK` per statement, and the walk stops after
    ``scan_cap`` rows (``None``: no cap).
    """
    if limit < 1:
        return ScannedPage([], None, 0)
    looks_at_rows = _looks_at_rows(selection, keep)
    if looks_at_rows:
        chunk = SCAN_CHUNK if scan_cap is None else min(SCAN_CHUNK, scan_cap)
    else:
        chunk, scan_cap = limit + 1, None  # every row read is listed
    # Unfiltered, a queue message that is no job takes its place in the page unlisted,
    # so a page still costs one read of ``limit + 1`` messages.
    holds_place = not looks_at_rows
    found: list[_Position] = []
    scanned = 0
    for positions in _positions(index, namespace, selection, cursor, chunk):
        candidates = [row for row, _ in positions if row is not None and selection.picks_row(row)]
        kept = {row.job_id for row in (keep(candidates) if keep else candidates)}
        for row, resume in positions:
            scanned += 1
            if (row.job_id in kept) if row is not None else holds_place:
                found.append((row, resume))
                if len(found) > limit:
                    return ScannedPage(_rows(found[:limit]), found[limit - 1][1], scanned)
            if scan_cap is not None and scanned >= scan_cap:
                return _capped(found, limit, scanned, resume)
    return ScannedPage(_rows(found), None, scanned)


def _looks_at_rows(selection: JobSelection, keep: RowFilter | None) -> bool:
    """Whether the list has a filter the index order cannot serve: a record filter,
    a task filter, or a time range over the queue's messages (ordered by sequence)."""
    if keep is not None or selection.task_path is not None or selection.task_prefix is not None:
        return True
    timed = selection.since_ms is not None or selection.until_ms is not None
    return timed and selection.stage == ENQUEUED


def _rows(found: list[_Position]) -> list[JobIndexRow]:
    return [row for row, _ in found if row is not None]


def _capped(found: list[_Position], limit: int, scanned: int, resume: str) -> ScannedPage:
    """The page of a walk that reached its cap: a full page goes on from its last
    row (a next page), a short one from where the walk stopped."""
    if len(found) == limit:
        return ScannedPage(_rows(found), found[-1][1], scanned)
    return ScannedPage(_rows(found), None, scanned, stopped_at=resume)


def _positions(
    index: JobIndexPort, namespace: str, selection: JobSelection, cursor: str | None, chunk: int
) -> Iterator[list[_Position]]:
    """The stage's positions after ``cursor`` in chunks of at most ``chunk``: for
    ``enqueued`` the queue's unclaimed messages first, then the index rows (from
    ``until_ms``, ending before the first row older than ``since_ms``)."""
    if selection.stage == ENQUEUED and (cursor is None or cursor.startswith(QUEUE_CURSOR)):
        before = None if cursor is None else _parse_queue_cursor(cursor)
        while True:
            messages = index.queued_messages(namespace, before, chunk)
            if messages:
                before = messages[-1].sequence
                yield [(queued_job_row(m), f"{QUEUE_CURSOR}{m.sequence}") for m in messages]
            if len(messages) < chunk:
                break
        cursor = None
    if cursor is None or cursor == INDEX_CURSOR:
        cursor = selection.first_cursor()
    while True:
        page = index.job_index_list_by_stage(namespace, selection.stage, cursor, chunk)
        rows = page.items
        if selection.since_ms is not None:
            rows = [row for row in rows if row.stage_date_ms >= selection.since_ms]
        if rows:
            yield [(row, stage_cursor(row)) for row in rows]
        if page.next_cursor is None or len(rows) < len(page.items):
            return
        cursor = page.next_cursor


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
        return int(cursor.removeprefix(QUEUE_CURSOR))
    except ValueError:
        raise ValueError(f"not a job-list cursor: {cursor!r}") from None
