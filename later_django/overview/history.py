"""The charts' reads: queue-length readings over a range, and the moves into the
finishing stages per time slot (the dashboard's two charts).

Each is one bounded read of a metrics table (``later_queue_samples``,
``later_job_transition_metrics``), never of the jobs.
"""

from __future__ import annotations

from later_django.core import clock
from later_django.overview.target import resolve_target
from later_django.storage.stores import stores_for
from later_django.storage.types import QueueSample

#: Queue-length history ranges of the chart, in minutes.
HISTORY_RANGES: dict[str, int] = {"hour": 60, "day": 24 * 60, "week": 7 * 24 * 60}
#: The stages the throughput chart draws: moves into them are jobs finishing.
THROUGHPUT_CHART_STAGES: tuple[str, ...] = ("success", "failed")


def read_queue_history(
    range_name: str,
    using: str | None = None,
    namespace: str | None = None,
    *,
    now_ms: int | None = None,
) -> list[QueueSample]:
    """The queue-length readings of the last ``range_name`` (``hour``/``day``/``week``),
    oldest first; ``ValueError`` for another range."""
    if range_name not in HISTORY_RANGES:
        raise ValueError(f"unknown history range {range_name!r}; use one of {list(HISTORY_RANGES)}")
    using, namespace = resolve_target(using, namespace)
    now = clock.now_ms() if now_ms is None else now_ms
    since = now - HISTORY_RANGES[range_name] * clock.MINUTE_MS
    return stores_for(using).metrics.queue_samples_since(namespace, since)


def read_throughput(
    first_bucket: int,
    last_bucket: int,
    slot_minutes: int,
    using: str | None = None,
    namespace: str | None = None,
    *,
    stages: tuple[str, ...] = THROUGHPUT_CHART_STAGES,
) -> dict[str, list[tuple[int, int, int]]]:
    """Per stage, the moves into it in the minute buckets ``first_bucket..last_bucket``
    folded into slots of ``slot_minutes``: ``(slot, moves, busiest minute's moves)`` per
    slot with moves (``later_job_transition_metrics``, one bounded read per stage)."""
    using, namespace = resolve_target(using, namespace)
    reads = stores_for(using).dashboard
    return {
        stage: reads.transitions_per_slot(namespace, stage, first_bucket, last_bucket, slot_minutes)
        for stage in stages
    }
