"""The queue-length history chart: ``later_queue_samples`` as server-rendered SVG data.

No JavaScript and no external asset: :func:`queue_chart` turns the readings
into polyline coordinates (numbers only) that the template writes into an
``<svg>``. Readings are folded into at most :data:`MAX_POINTS` columns (the
maximum of each column), so a week of minutes draws as fast as an hour.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from later_django.admin.jobs import when
from later_django.core import clock
from later_django.overview import HISTORY_RANGES
from later_django.storage.types import QueueSample

WIDTH = 600
HEIGHT = 160
MAX_POINTS = 240


@dataclass(frozen=True)
class QueueChart:
    range_name: str
    width: int
    height: int
    queued_points: str
    partitioned_points: str
    max_value: int
    samples: int
    latest_queued: int | None
    latest_partitioned: int | None
    start: datetime | None
    end: datetime | None


def _fold(samples: list[QueueSample], start_ms: int, span_ms: int) -> list[tuple[int, int, int]]:
    """``(column, max queued, max partitioned)`` per column with readings."""
    columns: dict[int, tuple[int, int]] = {}
    for sample in samples:
        column = min(MAX_POINTS - 1, max(0, (sample.at_ms - start_ms) * MAX_POINTS // span_ms))
        queued, partitioned = columns.get(column, (0, 0))
        columns[column] = (max(queued, sample.queued), max(partitioned, sample.partitioned))
    return [(column, *columns[column]) for column in sorted(columns)]


def queue_chart(samples: list[QueueSample], range_name: str, now_ms: int) -> QueueChart:
    """The chart of ``samples`` over the ``range_name`` ending at ``now_ms``."""
    span_ms = HISTORY_RANGES[range_name] * clock.MINUTE_MS
    start_ms = now_ms - span_ms
    folded = _fold(samples, start_ms, span_ms)
    top = max([1, *(max(q, p) for _, q, p in folded)])

    def points(pick: int) -> str:
        coordinates = []
        for entry in folded:
            x = entry[0] * WIDTH // (MAX_POINTS - 1)
            y = HEIGHT - entry[pick] * HEIGHT // top
            coordinates.append(f"{x},{y}")
        return " ".join(coordinates)

    latest = samples[-1] if samples else None
    return QueueChart(
        range_name=range_name,
        width=WIDTH,
        height=HEIGHT,
        queued_points=points(1),
        partitioned_points=points(2),
        max_value=top,
        samples=len(samples),
        latest_queued=None if latest is None else latest.queued,
        latest_partitioned=None if latest is None else latest.partitioned,
        start=when(start_ms),
        end=when(now_ms),
    )
