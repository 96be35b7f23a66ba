"""The template context of the dashboard panels, shared by the plain admin page (its
view, :func:`dashboard`, is here) and the admin-tools modules.

The overview (:func:`later_django.overview.snapshot.read_overview`) is read once per
request and kept on the request, so an admin-tools dashboard with eight
modules still reads the figures once. Two query parameters are honoured, both
validated (anything else falls back to the default, never an error):

* ``?range=hour|day|week`` (default ``hour``): the range of both charts;
* ``?internal=1``: list later_django's own topics (``__later…``) in the
  partitions panel too; hidden by default, where one line says what is hidden.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString, mark_safe

from later_django.admin.chart import (
    Chart,
    Series,
    build_chart,
    chart_svg,
    chart_window,
    fill_counts,
    fold_max,
)
from later_django.admin.pages import render_page
from later_django.admin.units import NONE_TEXT, human_duration, when
from later_django.core.keys import is_reserved
from later_django.overview.figures import Overview, PartitionFigure, TopicFigure
from later_django.overview.history import (
    HISTORY_RANGES,
    THROUGHPUT_CHART_STAGES,
    read_queue_history,
    read_throughput,
)
from later_django.overview.snapshot import read_overview
from later_django.storage.types import QueueSample

DEFAULT_RANGE = "hour"
_REQUEST_ATTRIBUTE = "_later_dashboard_context"
#: The throughput chart's unit per range (its slots hold the moves of 1, 10 or 60 minutes).
THROUGHPUT_UNITS = {"hour": "jobs / min", "day": "jobs / 10 min", "week": "jobs / hour"}
#: Legend and CSS class of each stage the throughput chart draws.
THROUGHPUT_LINES = {
    "success": ("succeeded", "later-chart-success"),
    "failed": ("failed", "later-chart-failed"),
}


def history_range(request: HttpRequest) -> str:
    """The chart range asked for by ``?range=`` (``hour`` when absent or unknown)."""
    asked = request.GET.get("range", DEFAULT_RANGE)
    return asked if asked in HISTORY_RANGES else DEFAULT_RANGE


def show_internal(request: HttpRequest) -> bool:
    """Whether ``?internal=1`` asks for later_django's own topics."""
    return request.GET.get("internal") == "1"


def _query(range_name: str, internal: bool) -> str:
    """The query string of the dashboard with this range and internal-topics choice."""
    params = {} if range_name == DEFAULT_RANGE else {"range": range_name}
    if internal:
        params["internal"] = "1"
    return f"?{urlencode(params)}" if params else "?"


def distinct(values: Iterable[str]) -> list[str]:
    """``values`` without repeats, in first-seen order (worker ids, queue names)."""
    return list(dict.fromkeys(values))


def dashboard_context(request: HttpRequest) -> dict[str, Any]:
    """Everything the panels show, read once per request."""
    cached = getattr(request, _REQUEST_ATTRIBUTE, None)
    if cached is not None:
        return cached
    overview = read_overview()
    range_name = history_range(request)
    internal = show_internal(request)
    samples = read_queue_history(
        range_name, overview.using, overview.namespace, now_ms=overview.now_ms
    )
    shown_topics = [t for t in overview.topics if internal or not is_reserved(t.topic)]
    hidden_topics = [t for t in overview.topics if not internal and is_reserved(t.topic)]
    context = {
        "overview": overview,
        "stage_rows": _stage_rows(overview),
        "throughput_rows": _throughput_rows(overview),
        "wait_rows": _wait_rows(overview),
        "queue_rows": _queue_rows(overview),
        "chart": queue_chart(samples, range_name, overview.now_ms),
        "throughput_chart": throughput_chart(overview, range_name),
        "history_ranges": list(HISTORY_RANGES),
        "range_links": [
            {"name": name, "query": _query(name, internal), "current": name == range_name}
            for name in HISTORY_RANGES
        ],
        "worker_rows": _worker_rows(overview),
        "topic_rows": _topic_rows(shown_topics),
        "hidden_topics": _hidden_topics(hidden_topics),
        "show_internal": internal,
        "internal_query": _query(range_name, not internal),
        "recurring_rows": _recurring_rows(overview),
        "db_size_bytes": overview.db_size_bytes,
    }
    setattr(request, _REQUEST_ATTRIBUTE, context)
    return context


def queue_chart(samples: list[QueueSample], range_name: str, now_ms: int) -> dict[str, Any]:
    """The queue-length chart (queued and partitioned, the highest reading per slot)."""
    window = chart_window(range_name, now_ms)
    queued = fold_max(((s.at_ms, s.queued) for s in samples), window)
    partitioned = fold_max(((s.at_ms, s.partitioned) for s in samples), window)
    chart = build_chart(
        "Queue length",
        "jobs",
        window,
        [
            Series("queued", "later-chart-queued", tuple(queued)),
            Series("partitioned", "later-chart-partitioned", tuple(partitioned)),
        ],
    )
    inside = [s for s in samples if window.index_of(s.at_ms) is not None]
    latest = inside[-1] if inside else None
    return {
        **_chart_fields(chart),
        "samples": len(inside),
        "latest_queued": None if latest is None else latest.queued,
        "latest_partitioned": None if latest is None else latest.partitioned,
        "start": when(window.start_ms),
        "end": when(window.end_ms),
    }


def throughput_chart(overview: Overview, range_name: str) -> dict[str, Any]:
    """Jobs finished per slot (succeeded, failed) from the transition metrics."""
    window = chart_window(range_name, overview.now_ms)
    slots = read_throughput(
        window.first_bucket,
        window.last_bucket,
        window.slot_minutes,
        overview.using,
        overview.namespace,
    )
    series, totals = [], []
    for stage in THROUGHPUT_CHART_STAGES:
        label, css_class = THROUGHPUT_LINES[stage]
        rows = slots.get(stage, [])
        counts = fill_counts(((slot, moves) for slot, moves, _ in rows), window)
        series.append(Series(label, css_class, tuple(counts)))
        totals.append(
            {
                "label": label,
                "css_class": css_class,
                "total": sum(counts),
                "busiest_minute": max((busiest for _, _, busiest in rows), default=0),
            }
        )
    chart = build_chart("Jobs finished", THROUGHPUT_UNITS[range_name], window, series)
    return {**_chart_fields(chart), "totals": totals, "unit": chart.unit}


def _chart_fields(chart: Chart) -> dict[str, Any]:
    svg: SafeString = mark_safe(chart_svg(chart))  # chart_svg escapes every text
    return {
        "svg": svg,
        "range_name": chart.range_name,
        "peak": chart.peak,
        "points": chart.window.slots,
        "slot_minutes": chart.window.slot_minutes,
        "legend": [(line.series.label, line.series.css_class) for line in chart.lines],
    }


def _stage_rows(overview: Overview) -> list[dict[str, Any]]:
    return [
        {
            "stage": figure.stage,
            "count": figure.count,
            "live": figure.live,
        }
        for figure in overview.stages
    ]


def _throughput_rows(overview: Overview) -> list[dict[str, Any]]:
    return [{"stage": stage, "count": count} for stage, count in overview.transitions.items()]


def _wait_rows(overview: Overview) -> list[dict[str, Any]]:
    return [
        {
            "mode": mode,
            "count": s.count,
            "avg_ms": s.avg_ms,
            "max_ms": s.max_ms,
            "avg": human_duration(s.avg_ms) if s.count else NONE_TEXT,
            "max": human_duration(s.max_ms) if s.count else NONE_TEXT,
        }
        for mode, s in overview.waits.items()
    ]


def _queue_rows(overview: Overview) -> list[dict[str, Any]]:
    return [
        {
            "name": queue.queue_name,
            "ready": queue.ready,
            "oldest_seconds": None
            if queue.oldest_ready_age_ms is None
            else round(queue.oldest_ready_age_ms / 1000, 1),
            "oldest": human_duration(queue.oldest_ready_age_ms),
        }
        for queue in overview.queues
    ]


def _worker_rows(overview: Overview) -> list[dict[str, Any]]:
    """One row per worker id (the first, i.e. as read), its queues without repeats."""
    rows: dict[str, dict[str, Any]] = {}
    for worker in overview.workers:
        if worker.worker_id in rows:
            continue
        ago_ms = max(overview.now_ms - worker.heartbeat_at_ms, 0)
        rows[worker.worker_id] = {
            "worker_id": worker.worker_id,
            "host": worker.host,
            "pid": worker.pid,
            "concurrency": worker.concurrency,
            "queues": ", ".join(distinct(worker.queues)),
            "busy": worker.busy,
            "started_at": when(worker.started_at_ms),
            "heartbeat_at": when(worker.heartbeat_at_ms),
            "heartbeat_seconds_ago": round(ago_ms / 1000, 1),
            "heartbeat_ago": human_duration(ago_ms),
            "up_for": human_duration(max(overview.now_ms - worker.started_at_ms, 0)),
        }
    return list(rows.values())


def _topic_rows(topics: list[TopicFigure]) -> list[dict[str, Any]]:
    return [
        {
            "topic": topic.topic,
            "partitions": topic.partitions,
            "not_shown": topic.not_shown,
            "internal": is_reserved(topic.topic),
            "rows": [_partition_row(partition) for partition in topic.shown],
        }
        for topic in topics
    ]


def _hidden_topics(topics: list[TopicFigure]) -> dict[str, Any] | None:
    """What the partitions panel says about the internal topics it does not list."""
    if not topics:
        return None
    return {
        "names": ", ".join(topic.topic for topic in topics),
        "count": len(topics),
        "backlog": sum(topic.backlog for topic in topics),
    }


def _partition_row(p: PartitionFigure) -> dict[str, Any]:
    return {
        "partition_id": p.partition_id,
        "head_job_id": p.head_job_id,
        "head_stage": p.head_stage,
        "head_sequence": p.head_sequence,
        "backlog": p.backlog,
        "lease_owner": p.lease_owner,
        "lease_until": when(p.lease_until_ms),
        "lease_live": p.lease_live,
        "epoch": p.epoch,
        "blocked": p.blocked,
    }


def _recurring_rows(overview: Overview) -> list[dict[str, Any]]:
    return [
        {
            "id": item.recurring_id,
            "cron": item.cron,
            "task_path": item.task_path,
            "timezone": item.timezone,
            "sequential": item.sequential,
            "next_run": when(item.next_run_ms),
            "last_run": when(item.last_run_ms),
        }
        for item in overview.recurring
    ]


def dashboard(request: HttpRequest) -> TemplateResponse:
    """Every panel on one page (the same panels as the admin-tools modules)."""
    return render_page(
        request,
        "later_django/dashboard.html",
        "Later jobs",
        later_page="dashboard",
        **dashboard_context(request),
    )
