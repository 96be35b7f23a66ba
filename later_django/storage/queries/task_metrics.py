"""Statements of the per-task and per-queue attempt figures (``later_task_minute``).

Every read is one range of the primary key ``(namespace, minute_bucket, …)``: the
minutes of a window, grouped; what it costs is the window's rows, never the jobs.
The failing outcomes are the code constants of :mod:`later_django.core.attempts`,
written into the text once at import (fixed text, never values).
"""

from __future__ import annotations

from later_django.core.attempts import FAILING_OUTCOMES, SUCCEEDED
from later_django.storage.driver import RowsStatement

#: ``'retried', 'failed', 'timed_out'``
FAILING_OUTCOME_LIST = ", ".join(f"'{outcome}'" for outcome in FAILING_OUTCOMES)
#: The columns a flush writes, in the order of its rows' fields.
COLUMNS = (
    "namespace, minute_bucket, task_path, queue_name, outcome, error_class, duration_bucket,"
    " count, sum_ms, max_ms, sample_job_id"
)
KEY = "namespace, minute_bucket, task_path, queue_name, outcome, error_class, duration_bucket"
INTO = f"INSERT INTO later_task_minute ({COLUMNS})"
_WINDOW = (
    " WHERE namespace = %(namespace)s"
    " AND minute_bucket >= %(first_bucket)s AND minute_bucket <= %(last_bucket)s"
)
_OUTCOME_SUMS = (
    "SELECT task_path, outcome, duration_bucket, SUM(count), SUM(sum_ms), MAX(max_ms)"
    " FROM later_task_minute" + _WINDOW + "{task}"
    " GROUP BY task_path, outcome, duration_bucket"
)
_OF_TASK = " AND task_path = %(task_path)s"
#: ``'succeeded'``
_SUCCEEDED = f"'{SUCCEEDED}'"


def upsert_conflict(greatest: str, text_greatest: str) -> str:
    """The flush's conflict clause: counts and sums add, the max and the sample job id
    (the newest ULID: compared byte-wise, ``text_greatest``) are the largest."""
    return (
        f" ON CONFLICT ({KEY}) DO UPDATE SET"
        " count = later_task_minute.count + excluded.count,"
        " sum_ms = later_task_minute.sum_ms + excluded.sum_ms,"
        f" max_ms = {greatest}(later_task_minute.max_ms, excluded.max_ms),"
        " sample_job_id = "
        + text_greatest.format(a="later_task_minute.sample_job_id", b="excluded.sample_job_id")
    )


def failure_groups_statement(text_max: str, *, of_task: bool) -> str:
    """The failing attempts of a window per (task, error class), most first, at most
    ``limit`` groups; ``text_max`` the vendor's byte-wise ``MAX`` of a text column."""
    return (
        "SELECT task_path, error_class, SUM(count), MIN(minute_bucket), MAX(minute_bucket), "
        + text_max.format(column="sample_job_id")
        + " FROM later_task_minute"
        + _WINDOW
        + f" AND outcome IN ({FAILING_OUTCOME_LIST})"
        + (_OF_TASK if of_task else "")
        + " GROUP BY task_path, error_class"
        " ORDER BY SUM(count) DESC, task_path, error_class LIMIT %(limit)s"
    )


class TaskMetricQueries:
    """Per-task attempt statements."""

    #: (task, outcome, duration bucket) sums of every task in the window.
    outcome_sums = _OUTCOME_SUMS.format(task="")
    #: The same for one task (``task_path``).
    outcome_sums_of_task = _OUTCOME_SUMS.format(task=_OF_TASK)
    #: Succeeded and failing attempts of the window per queue, by queue name.
    queue_attempts = (
        "SELECT queue_name,"
        f" SUM(CASE WHEN outcome = {_SUCCEEDED} THEN count ELSE 0 END),"
        f" SUM(CASE WHEN outcome IN ({FAILING_OUTCOME_LIST}) THEN count ELSE 0 END)"
        " FROM later_task_minute"
        + _WINDOW
        + f" AND outcome IN ({_SUCCEEDED}, {FAILING_OUTCOME_LIST})"
        " GROUP BY queue_name ORDER BY queue_name"
    )
    #: One task's attempts per slot of ``slot_minutes`` and outcome, oldest slot first.
    throughput_of_task = (
        "SELECT minute_bucket / CAST(%(slot_minutes)s AS INTEGER) AS slot, outcome, SUM(count)"
        " FROM later_task_minute"
        + _WINDOW
        + _OF_TASK
        + " GROUP BY slot, outcome ORDER BY slot, outcome"
    )

    # Spelled per vendor.
    #: Rows of the :data:`COLUMNS` but ``namespace`` (shared), one per key, in key order.
    record: RowsStatement
    failure_groups: str
    failure_groups_of_task: str
    #: Deletes up to ``limit`` rows of the namespace before ``before_bucket``.
    sweep: str
