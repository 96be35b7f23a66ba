"""The template context of the dashboard panels, shared by the plain admin page and
the admin-tools modules.

The overview (:func:`later_django.overview.read_overview`) is read once per
request and kept on the request, so an admin-tools dashboard with seven
modules still reads the figures once.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from later_django.admin.chart import queue_chart
from later_django.admin.jobs import when
from later_django.overview import (
    HISTORY_RANGES,
    Overview,
    PartitionFigure,
    read_overview,
    read_queue_history,
)

DEFAULT_RANGE = "hour"
_REQUEST_ATTRIBUTE = "_later_dashboard_context"


def history_range(request: HttpRequest) -> str:
    """The chart range asked for by ``?range=`` (``hour`` when absent or unknown)."""
    asked = request.GET.get("range", DEFAULT_RANGE)
    return asked if asked in HISTORY_RANGES else DEFAULT_RANGE


def dashboard_context(request: HttpRequest) -> dict[str, Any]:
    """Everything the panels show, read once per request."""
    cached = getattr(request, _REQUEST_ATTRIBUTE, None)
    if cached is not None:
        return cached
    overview = read_overview()
    range_name = history_range(request)
    samples = read_queue_history(
        range_name, overview.using, overview.namespace, now_ms=overview.now_ms
    )
    context = {
        "overview": overview,
        "stage_rows": _stage_rows(overview),
        "throughput_rows": _throughput_rows(overview),
        "wait_rows": _wait_rows(overview),
        "queue_rows": _queue_rows(overview),
        "chart": queue_chart(samples, range_name, overview.now_ms),
        "history_ranges": list(HISTORY_RANGES),
        "worker_rows": _worker_rows(overview),
        "topic_rows": _topic_rows(overview),
        "recurring_rows": _recurring_rows(overview),
        "db_size_bytes": overview.db_size_bytes,
    }
    setattr(request, _REQUEST_ATTRIBUTE, context)
    return context


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
        {"mode": mode, "count": s.count, "avg_ms": s.avg_ms, "max_ms": s.max_ms}
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
        }
        for queue in overview.queues
    ]


def _worker_rows(overview: Overview) -> list[dict[str, Any]]:
    return [
        {
            "worker_id": worker.worker_id,
            "host": worker.host,
            "pid": worker.pid,
            "concurrency": worker.concurrency,
            "queues": ", ".join(worker.queues),
            "busy": worker.busy,
            "started_at": when(worker.started_at_ms),
            "heartbeat_at": when(worker.heartbeat_at_ms),
            "heartbeat_seconds_ago": round(
                max(overview.now_ms - worker.heartbeat_at_ms, 0) / 1000, 1
            ),
        }
        for worker in overview.workers
    ]


def _topic_rows(overview: Overview) -> list[dict[str, Any]]:
    return [
        {
            "topic": topic.topic,
            "partitions": topic.partitions,
            "not_shown": topic.not_shown,
            "rows": [_partition_row(partition) for partition in topic.shown],
        }
        for topic in overview.topics
    ]


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
