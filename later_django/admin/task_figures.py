"""What the task and failure pages show, read from ``later_task_minute`` only.

Never from the jobs: every figure is a grouped read of the window's minute rows
(:class:`~later_django.storage.ports.metrics.MetricsPort`), so a page costs the window's rows
(at most tasks, outcomes, duration buckets and minutes multiplied), whatever the number of jobs.
The one read outside that table is the failure groups' sample tracebacks: one record
per group shown, read by key in one statement.

A window is the chart's (:func:`later_django.admin.chart.chart_window`): whole UTC slots
ending with the current one, so the figures and the throughput chart cover the same
minutes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from later_django.admin.chart import Series, Window, build_chart, chart_svg, fill_counts
from later_django.core.attempts import ATTEMPT_OUTCOMES, FAILING_OUTCOMES, SUCCEEDED
from later_django.core.duration_histogram import quantile
from later_django.core.records import JobError
from later_django.engine.record_reads import read_records
from later_django.storage.stores import stores_for
from later_django.storage.types import FailureGroup, TaskOutcomeSums

#: The most failure groups a page lists (the most frequent first).
FAILURE_GROUPS_SHOWN = 50
#: The throughput chart's unit per range (slots of 1, 10 or 60 minutes).
ATTEMPT_UNITS = {"hour": "attempts / min", "day": "attempts / 10 min", "week": "attempts / hour"}
#: The throughput chart's lines: legend, CSS class, the outcomes each one sums.
THROUGHPUT_LINES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("succeeded", "later-chart-success", (SUCCEEDED,)),
    ("failing", "later-chart-failed", FAILING_OUTCOMES),
)


@dataclass(frozen=True)
class TaskFigures:
    """One task's attempts in a window."""

    task_path: str
    attempts: int
    #: Attempts per outcome, in the order of ``ATTEMPT_OUTCOMES`` (zeros included).
    outcomes: tuple[tuple[str, int], ...]
    #: Share of attempts that failed, were retried or timed out (None without attempts).
    failure_rate: float | None
    #: Duration quantiles of the attempts with a known duration (decision 101's bound).
    p50_ms: float | None
    p95_ms: float | None
    max_ms: int | None

    @property
    def failing(self) -> int:
        return sum(count for outcome, count in self.outcomes if outcome in FAILING_OUTCOMES)


def fold_task_figures(rows: Iterable[TaskOutcomeSums]) -> list[TaskFigures]:
    """The figures of each task in ``rows`` (sums per task, outcome and duration
    bucket), the most attempts first, then by task path."""
    outcomes: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(ATTEMPT_OUTCOMES, 0))
    histograms: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    longest: dict[str, int] = {}
    for row in rows:
        counts = outcomes[row.task_path]
        counts[row.outcome] = counts.get(row.outcome, 0) + row.count
        histograms[row.task_path][row.duration_bucket] += row.count
        if row.duration_bucket >= 0:
            longest[row.task_path] = max(longest.get(row.task_path, 0), row.max_ms)
    figures = []
    for task_path, counts in outcomes.items():
        attempts = sum(counts.values())
        failing = sum(counts.get(outcome, 0) for outcome in FAILING_OUTCOMES)
        max_ms = longest.get(task_path)
        histogram = histograms[task_path]
        figures.append(
            TaskFigures(
                task_path=task_path,
                attempts=attempts,
                outcomes=tuple((outcome, counts.get(outcome, 0)) for outcome in ATTEMPT_OUTCOMES),
                failure_rate=failing / attempts if attempts else None,
                p50_ms=None if max_ms is None else quantile(histogram, 0.5, max_ms),
                p95_ms=None if max_ms is None else quantile(histogram, 0.95, max_ms),
                max_ms=max_ms,
            )
        )
    return sorted(figures, key=lambda figure: (-figure.attempts, figure.task_path))


def read_task_figures(
    using: str, namespace: str, window: Window, task_path: str | None = None
) -> list[TaskFigures]:
    """Every task with attempts in ``window`` (or ``task_path`` only: a list of at most
    one), one grouped read."""
    rows = stores_for(using).metrics.task_outcome_sums(
        namespace, window.first_bucket, window.last_bucket, task_path
    )
    return fold_task_figures(rows)


def attempts_chart(using: str, namespace: str, task_path: str, window: Window) -> str:
    """The ``<svg>`` of ``task_path``'s attempts per slot of ``window``: succeeded and
    failing (retried, failed, timed out) lines; cancelled attempts are not drawn."""
    slots = stores_for(using).metrics.task_throughput(
        namespace, task_path, window.first_bucket, window.last_bucket, window.slot_minutes
    )
    series = [
        Series(
            label,
            css_class,
            tuple(
                fill_counts(
                    ((slot, count) for slot, outcome, count in slots if outcome in summed), window
                )
            ),
        )
        for label, css_class, summed in THROUGHPUT_LINES
    ]
    chart = build_chart("Attempts", ATTEMPT_UNITS[window.range_name], window, series)
    return chart_svg(chart)


@dataclass(frozen=True)
class FailureRow:
    """A failure group as the page shows it, with its sample job's last error."""

    group: FailureGroup
    #: The sample job's traceback of this error class ("" when its record is gone).
    traceback: str
    #: Why the sample job failed when its record says (a retry policy's rule gave up
    #: at once, its parent failed), when its last error is of this class; else "".
    reason: str = ""

    @property
    def error_class(self) -> str:
        return self.group.error_class


def read_failures(
    using: str, namespace: str, window: Window, task_path: str | None = None
) -> list[FailureRow]:
    """The failure groups of ``window`` (of every task, or of ``task_path``), at most
    :data:`FAILURE_GROUPS_SHOWN`, the most frequent first, each with its sample job's
    traceback and reason (:class:`FailureRow`): one grouped read, then the sample
    records by key in one statement."""
    stores = stores_for(using)
    groups = stores.metrics.failure_groups(
        namespace, window.first_bucket, window.last_bucket, FAILURE_GROUPS_SHOWN, task_path
    )
    samples = read_records(
        stores.kv, namespace, {group.sample_job_id for group in groups if group.sample_job_id}
    )
    rows = []
    for group in groups:
        record = samples.get(group.sample_job_id)
        errors: list[JobError] = [] if record is None else record.errors
        matching = [error for error in errors if error.exception_class_path == group.error_class]
        last_is_ours = bool(matching) and errors[-1] is matching[-1]
        reason = (record.reason or "") if record is not None and last_is_ours else ""
        rows.append(FailureRow(group, matching[-1].traceback if matching else "", reason))
    return rows
