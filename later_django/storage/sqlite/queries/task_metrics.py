"""SQLite statements of the per-task attempt figures: rows as multi-row ``VALUES``."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.queries.task_metrics import (
    INTO,
    TaskMetricQueries,
    failure_groups_statement,
    upsert_conflict,
)
from later_django.storage.sqlite import SqliteDriver

#: SQLite compares text byte-wise (``BINARY``) unless told otherwise.
_TEXT_MAX = "MAX({column})"


@SqliteDriver.register
class SqliteTaskMetricQueries(TaskMetricQueries):
    record = RowsStatement(
        INTO + " VALUES {values}" + upsert_conflict("MAX", "MAX({a}, {b})"),
        row=(
            "(%(namespace)s, %(minute_bucket)s, %(task_path)s, %(queue_name)s, %(outcome)s,"
            " %(error_class)s, %(duration_bucket)s, %(count)s, %(sum_ms)s, %(max_ms)s,"
            " %(sample_job_id)s)"
        ),
    )
    failure_groups = failure_groups_statement(_TEXT_MAX, of_task=False)
    failure_groups_of_task = failure_groups_statement(_TEXT_MAX, of_task=True)
    sweep = (
        "DELETE FROM later_task_minute WHERE rowid IN ("
        " SELECT rowid FROM later_task_minute"
        " WHERE namespace = %(namespace)s AND minute_bucket < %(before_bucket)s"
        " LIMIT %(limit)s)"
    )
