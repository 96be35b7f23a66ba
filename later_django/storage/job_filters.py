"""The job index's filtered lists (issue 32): keyset pages of the filter indexes of
migration 0018, and the stage cursors every job list shares.

A filter on the task, the queue or the last error's class is answered by one of
``later_jobs_index_{task,queue,error}_idx`` ``(namespace, stage, <column>,
stage_date_ms, job_id)``, walked newest first from the cursor: a page reads its rows
and no more, and a filter that matches nothing reads nothing. Several filters at
once: the database walks one of those indexes (its estimate of the fewest rows) and
checks the others on the rows it reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from later_django.core import clock
from later_django.storage.driver import Driver
from later_django.storage.queries.index import UNINDEXED_FILTER_STAGES, IndexQueries
from later_django.storage.types import IndexFilters, JobIndexPage, JobIndexRow

#: The start marker of a stage page's cursor: the first index rows.
INDEX_CURSOR = "i"


def _row(values: Sequence[Any]) -> JobIndexRow:
    """A :class:`JobIndexRow` from the columns of ``ROW_COLUMNS``, in order."""
    return JobIndexRow(*values)


def stage_cursor(row: JobIndexRow) -> str:
    """The cursor of a stage page that ends with ``row``: ``i:<stage_date_ms>:<job_id>``."""
    return f"{INDEX_CURSOR}:{row.stage_date_ms}:{row.job_id}"


def parse_stage_cursor(cursor: str) -> tuple[int, str] | None:
    """``(stage_date_ms, job_id)`` of a stage cursor; ``None`` for the start marker
    ``i``; ``ValueError`` naming the cursor for anything else."""
    if cursor == INDEX_CURSOR:
        return None
    prefix, _, rest = cursor.partition(":")
    date_text, separator, job_id = rest.partition(":")
    if prefix != INDEX_CURSOR or not separator:
        raise ValueError(f"not a job-list cursor: {cursor!r}")
    try:
        return int(date_text), job_id
    except ValueError:
        raise ValueError(f"not a job-list cursor: {cursor!r}") from None


class FilteredIndexPort(Protocol):
    """The filtered lists of the job index port (:class:`~.ports.job_index.JobIndexPort`)."""

    def job_index_list_filtered(
        self,
        namespace: str,
        stage: str,
        filters: IndexFilters,
        cursor: str | None = None,
        limit: int = 50,
        since_ms: int | None = None,
    ) -> JobIndexPage:
        """:meth:`job_index_list_by_stage` of the rows ``filters`` match that entered the
        stage at or after ``since_ms``: a keyset walk of a filter index (migration 0018)
        whose cost is the page, however few rows match."""


class FilteredIndexReads:
    """The filtered lists of :class:`~later_django.storage.job_index.JobIndexStore`."""

    _driver: Driver
    _q: IndexQueries

    def job_index_list_filtered(
        self,
        namespace: str,
        stage: str,
        filters: IndexFilters,
        cursor: str | None = None,
        limit: int = 50,
        since_ms: int | None = None,
    ) -> JobIndexPage:
        """:meth:`job_index_list_by_stage` of the rows ``filters`` match (at least one
        given) that entered the stage at or after ``since_ms``: one keyset walk of a
        filter index, whose cost is the page, however few rows match (``enqueued``
        and ``running`` rows are not in those indexes: their stage's rows are walked)."""
        columns = filters.columns()
        if limit < 1 or not columns:
            raise ValueError("a filtered page needs a filter and a limit of at least 1")
        after = None if cursor is None else parse_stage_cursor(cursor)
        params: dict[str, Any] = {
            "namespace": namespace,
            "stage": stage,
            "now": clock.now_ms(),
            "limit": limit + 1,
            "since_ms": since_ms,
            **columns,
        }
        if after is not None:
            params["after_date_ms"], params["after_job_id"] = after
        statement = self._q.list_filtered(
            tuple(columns),
            after=after is not None,
            since=since_ms is not None,
            indexed=stage not in UNINDEXED_FILTER_STAGES,
        )
        rows = self._driver.fetch_all(statement, params)
        items = [_row(row) for row in rows[:limit]]
        return JobIndexPage(items, stage_cursor(items[-1]) if len(rows) > limit else None)
