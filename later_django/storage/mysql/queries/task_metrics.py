"""MySQL/MariaDB statements of the per-task attempt figures: a flush as derived
``UNION ALL`` rows under ``ON DUPLICATE KEY UPDATE``.

``later_task_minute`` is unique on ``(namespace, minute_bucket, row_hash)``, the hash
of the rest of the key (migration 0019), which the upsert's conflict finds. Its text
columns are ``utf8mb4_bin``: ``MAX`` of a job id is byte-wise there, as ``COLLATE
"C"`` makes it on PostgreSQL, and so is ``GREATEST`` of the stored job id and an
incoming one (the column's collation prevails over the bound text's; tried: ``job-a``
beats ``job-B``). No ``COLLATE`` is written: ``utf8mb4_bin`` is refused for text of a
``utf8mb3`` connection. ``GREATEST`` is NULL when any argument is (PostgreSQL's skips
NULLs): the incoming value falls back to the stored one.
"""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.task_metrics import (
    INTO,
    TaskMetricQueries,
    failure_groups_statement,
)

_TEXT_MAX = "MAX({column})"
_UNION = " UNION ALL "
_ROW_COLUMNS = (
    "minute_bucket",
    "task_path",
    "queue_name",
    "outcome",
    "error_class",
    "duration_bucket",
    "count",
    "sum_ms",
    "max_ms",
    "sample_job_id",
)
_STORED = "later_task_minute"


def _greatest(column: str) -> str:
    return f"{column} = GREATEST({_STORED}.{column}, COALESCE(new.{column}, {_STORED}.{column}))"


@MysqlDriver.register
class MysqlTaskMetricQueries(TaskMetricQueries):
    record = RowsStatement(
        INTO
        + " SELECT %(namespace)s, "
        + ", ".join(f"new.{column}" for column in _ROW_COLUMNS)
        + " FROM (SELECT "
        + ", ".join(f"NULL AS {column}" for column in _ROW_COLUMNS)
        + " FROM DUAL WHERE FALSE"
        + _UNION
        + "{values}) AS new ON DUPLICATE KEY UPDATE"
        f" count = {_STORED}.count + new.count,"
        f" sum_ms = {_STORED}.sum_ms + new.sum_ms, "
        + _greatest("max_ms")
        + ", "
        + _greatest("sample_job_id"),
        row="SELECT " + ", ".join(f"%({column})s" for column in _ROW_COLUMNS),
        joiner=_UNION,
    )
    failure_groups = failure_groups_statement(_TEXT_MAX, of_task=False)
    failure_groups_of_task = failure_groups_statement(_TEXT_MAX, of_task=True)
    # A range of the unique key (namespace, minute_bucket, ...), bounded by LIMIT (with
    # ``ORDER BY minute_bucket`` MariaDB sorted the whole range first).
    sweep = (
        "DELETE FROM later_task_minute"
        " WHERE namespace = %(namespace)s AND minute_bucket < %(before_bucket)s"
        " LIMIT %(limit)s"
    )
    # ``DIV``: MySQL has no ``CAST(... AS INTEGER)`` and its ``/`` divides in decimals.
    throughput_of_task = (
        "SELECT minute_bucket DIV %(slot_minutes)s AS slot, outcome, SUM(count)"
        " FROM later_task_minute"
        " WHERE namespace = %(namespace)s"
        " AND minute_bucket >= %(first_bucket)s AND minute_bucket <= %(last_bucket)s"
        " AND task_path = %(task_path)s"
        " GROUP BY slot, outcome ORDER BY slot, outcome"
    )
