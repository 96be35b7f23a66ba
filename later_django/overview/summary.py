"""A short summary of a namespace for a panel in another application's admin (the
Wagtail dashboard's, :mod:`later_django.contrib.wagtail`): jobs per stage and the jobs
that failed in the last hour.

Bounded like :func:`~later_django.overview.snapshot.read_overview`, and smaller: the
stage counters, the queues' depths and the per-minute transition buckets of one hour
(at most 60 rows per stage); nothing counts or scans the jobs' tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from later_django.core import clock
from later_django.overview.figures import StageFigure
from later_django.overview.snapshot import read_stages
from later_django.overview.target import resolve_target
from later_django.storage.stores import stores_for

#: The window of :attr:`Summary.failed_last_hour`, in minute buckets.
FAILURE_WINDOW_MINUTES = 60


@dataclass(frozen=True)
class Summary:
    """Jobs per stage (every stage, the dashboard's order) and the jobs that entered
    ``failed`` in the last :data:`FAILURE_WINDOW_MINUTES` minutes (whole minutes: the
    current one and the 59 before it)."""

    stages: list[StageFigure]
    failed_last_hour: int

    @property
    def live(self) -> list[StageFigure]:
        """The stages of jobs that have not finished."""
        return [figure for figure in self.stages if figure.live]

    @property
    def finished(self) -> list[StageFigure]:
        """The stages of finished jobs (counted until retention sweeps them)."""
        return [figure for figure in self.stages if not figure.live]


def read_summary(
    using: str | None = None, namespace: str | None = None, *, now_ms: int | None = None
) -> Summary:
    """The :class:`Summary` of ``namespace`` on ``using`` (defaults from ``LATER``), in a
    few bounded reads; read-only."""
    using, namespace = resolve_target(using, namespace)
    now = clock.now_ms() if now_ms is None else now_ms
    stores = stores_for(using)
    ready = sum(depth for _, depth in stores.dashboard.queue_depths(namespace))
    last = clock.minute_bucket(now)
    transitions = stores.dashboard.transitions_between(
        namespace, last - FAILURE_WINDOW_MINUTES + 1, last
    )
    return Summary(
        stages=read_stages(stores.dashboard, namespace, ready),
        failed_last_hour=max(transitions.get("failed", 0), 0),
    )
