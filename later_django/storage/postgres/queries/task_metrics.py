"""PostgreSQL statements of the per-task attempt figures: rows as arrays (``unnest``)."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.task_metrics import (
    INTO,
    TaskMetricQueries,
    failure_groups_statement,
    upsert_conflict,
)

#: Job ids are compared byte-wise (``C``), as Python compares them.
_TEXT_MAX = 'MAX({column} COLLATE "C")'


@PostgresDriver.register
class PostgresTaskMetricQueries(TaskMetricQueries):
    record = RowsStatement(
        INTO + " SELECT %(namespace)s::text, u.* FROM unnest("
        "%(minute_bucket)s::bigint[], %(task_path)s::text[], %(queue_name)s::text[],"
        " %(outcome)s::text[],"
        " %(error_class)s::text[], %(duration_bucket)s::smallint[], %(count)s::bigint[],"
        " %(sum_ms)s::bigint[], %(max_ms)s::bigint[], %(sample_job_id)s::text[]) AS u"
        + upsert_conflict("GREATEST", 'GREATEST({a} COLLATE "C", {b} COLLATE "C")')
    )
    failure_groups = failure_groups_statement(_TEXT_MAX, of_task=False)
    failure_groups_of_task = failure_groups_statement(_TEXT_MAX, of_task=True)
    sweep = (
        "DELETE FROM later_task_minute WHERE ctid IN ("
        " SELECT ctid FROM later_task_minute"
        " WHERE namespace = %(namespace)s AND minute_bucket < %(before_bucket)s"
        " LIMIT %(limit)s)"
    )
