"""The task and failure pages (staff only, read-only; their links lead to the actions).

* ``tasks/``: every task with attempts in the last hour or day (``?range=``): attempts
  by outcome, failure rate, p50/p95/max duration;
* ``tasks/<task path>/``: one task's figures, its attempts per slot (SVG chart) and its
  failure groups;
* ``failures/``: the failing attempts of the last hour or day grouped by task and
  error class: count, first and last minute seen, the newest job's traceback, a link to
  the failed jobs of that task and class, and "Retry all…" to their bulk retry.

Bounded by the window's rows of ``later_task_minute``, never by the number of jobs
(:mod:`later_django.admin.task_figures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.safestring import mark_safe

from later_django.admin.chart import chart_window
from later_django.admin.pages import path_name, render_page
from later_django.admin.task_figures import (
    FAILURE_GROUPS_SHOWN,
    FailureRow,
    TaskFigures,
    attempts_chart,
    read_failures,
    read_task_figures,
)
from later_django.admin.units import NONE_TEXT, human_duration, when
from later_django.core import clock, stages
from later_django.core.attempts import ATTEMPT_OUTCOMES
from later_django.core.clock import MINUTE_MS
from later_django.core.duration_histogram import RELATIVE_ERROR
from later_django.overview.target import resolve_target

#: The ranges of the task and failures pages. No week: its minute rows are up to
#: 252,025 in bench/dashboard.py's seed, which SQLite groups in about 200 ms, over the
#: 150 ms a page may take (an hourly roll-up would bring it back; decision 103).
TASK_RANGES = ("hour", "day")
FAILURE_RANGES = TASK_RANGES
DEFAULT_RANGE = "hour"
#: The query parameter that asks the failed list for its bulk retry.
BULK_RETRY = {"bulk": "retry"}


def _range(request: HttpRequest, allowed: tuple[str, ...]) -> str:
    """``?range=`` when it is one of ``allowed``, else the default (never an error)."""
    asked = request.GET.get("range", DEFAULT_RANGE)
    return asked if asked in allowed else DEFAULT_RANGE


def _percent(share: float | None) -> str:
    return NONE_TEXT if share is None else f"{share * 100:.1f} %".replace(".0 %", " %")


def _duration(ms: float | None) -> str:
    """A quantile or maximum in human units; below 1 ms reads ``< 1 ms``."""
    if ms is None:
        return NONE_TEXT
    return "< 1 ms" if ms < 1 else human_duration(ms)


@dataclass(frozen=True)
class TaskRow:
    """One task's line: its figures in human units and its page's address."""

    figures: TaskFigures
    url: str
    failure_rate: str
    p50: str
    p95: str
    max: str


def task_row(figures: TaskFigures, range_name: str) -> TaskRow:
    url = reverse("later_django:task_detail", args=[figures.task_path])
    return TaskRow(
        figures=figures,
        url=f"{url}?{urlencode({'range': range_name})}",
        failure_rate=_percent(figures.failure_rate),
        p50=_duration(figures.p50_ms),
        p95=_duration(figures.p95_ms),
        max=_duration(figures.max_ms),
    )


@dataclass(frozen=True)
class FailureLine:
    """One failure group's line: figures, sample and the addresses it links to."""

    row: FailureRow
    task_url: str
    first_seen: datetime | None
    last_seen: datetime | None
    sample_url: str
    failed_list_url: str
    retry_all_url: str


def failure_line(row: FailureRow, range_name: str) -> FailureLine:
    """The line of ``row``; its task link keeps the range where the task pages have it."""
    group = row.group
    failed = reverse("later_django:job_list", args=[stages.FAILED])
    selection = {"task": group.task_path, "error": group.error_class}
    task_url = reverse("later_django:task_detail", args=[group.task_path])
    task_range = range_name if range_name in TASK_RANGES else DEFAULT_RANGE
    return FailureLine(
        row=row,
        task_url=f"{task_url}?{urlencode({'range': task_range})}",
        first_seen=when(group.first_minute_ms),
        # The last minute seen ends a minute after it starts.
        last_seen=when(group.last_minute_ms + MINUTE_MS),
        sample_url=reverse("later_django:job_detail", args=[group.sample_job_id])
        if group.sample_job_id
        else "",
        failed_list_url=f"{failed}?{urlencode(selection)}",
        retry_all_url=f"{failed}?{urlencode({**selection, **BULK_RETRY})}",
    )


def _common(range_name: str, ranges: tuple[str, ...]) -> dict[str, object]:
    return {
        "range_name": range_name,
        "ranges": ranges,
        "outcome_labels": [outcome.replace("_", " ") for outcome in ATTEMPT_OUTCOMES],
        "error_bound": f"{RELATIVE_ERROR * 100:.0f} %",
    }


def task_list(request: HttpRequest) -> TemplateResponse:
    """Every task with attempts in the last hour or day (``?range=hour|day``): attempts
    by outcome, failure rate, p50/p95/max duration. One grouped read of the window's
    rows of ``later_task_minute``."""
    using, namespace = resolve_target(None, None)
    range_name = _range(request, TASK_RANGES)
    window = chart_window(range_name, clock.now_ms())
    rows = [
        task_row(figures, range_name) for figures in read_task_figures(using, namespace, window)
    ]
    return render_page(
        request,
        "later_django/task_list.html",
        "Tasks",
        later_page="tasks",
        tasks=rows,
        window_start=when(window.start_ms),
        **_common(range_name, TASK_RANGES),
    )


def task_detail(request: HttpRequest, task_path: str) -> TemplateResponse:
    """One task's attempts in the last hour or day: figures, attempts per slot (SVG)
    and its failure groups. Three grouped reads of the window's rows, then the failure
    samples' records by key. A task without attempts in the window shows zeros (it may
    have run before, or not at all: the table cannot tell). A path holding a NUL or
    longer than 200 characters names no task: 404."""
    task_path = path_name("task", task_path)
    using, namespace = resolve_target(None, None)
    range_name = _range(request, TASK_RANGES)
    window = chart_window(range_name, clock.now_ms())
    found = read_task_figures(using, namespace, window, task_path)
    svg = attempts_chart(using, namespace, task_path, window)
    failures = read_failures(using, namespace, window, task_path)
    return render_page(
        request,
        "later_django/task_detail.html",
        f"Task {task_path}",
        later_page="tasks",
        task_path=task_path,
        task=task_row(found[0], range_name) if found else None,
        chart_svg=mark_safe(svg),  # chart_svg escapes every text
        failures=[failure_line(row, range_name) for row in failures],
        window_start=when(window.start_ms),
        **_common(range_name, TASK_RANGES),
    )


def failure_list(request: HttpRequest) -> TemplateResponse:
    """The failing attempts (retried, failed, timed out) of the last hour or day
    grouped by task and error class, the most frequent first (at most
    ``FAILURE_GROUPS_SHOWN``). One grouped read of the window's rows, then one record
    per group (its newest job's traceback) by key in one statement."""
    using, namespace = resolve_target(None, None)
    range_name = _range(request, FAILURE_RANGES)
    window = chart_window(range_name, clock.now_ms())
    failures = read_failures(using, namespace, window)
    return render_page(
        request,
        "later_django/failure_list.html",
        "Failures",
        later_page="failures",
        failures=[failure_line(row, range_name) for row in failures],
        groups_shown=FAILURE_GROUPS_SHOWN,
        window_start=when(window.start_ms),
        **_common(range_name, FAILURE_RANGES),
    )
