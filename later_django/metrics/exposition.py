"""The metrics view's figures as Prometheus families, one overview per namespace.

:func:`render` reads one :class:`~later_django.overview.figures.Overview` per namespace
(about a dozen bounded statements each) and writes the text exposition format.
Every family of :data:`~later_django.core.metric_names.VIEW_METRICS` is present
in the output, with no sample where nothing exists (a namespace with no topic
has no topic samples).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from later_django.core.metric_names import VIEW_METRICS, MetricName
from later_django.overview.figures import Overview
from later_django.overview.snapshot import read_overview

try:
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError as error:  # pragma: no cover - the extra is installed in the tests
    raise ImportError(
        "later_django.metrics needs prometheus-client: pip install 'later-django[metrics]'"
    ) from error

#: The text exposition format's content type (version included).
CONTENT_TYPE = CONTENT_TYPE_LATEST
#: A recurring job whose next run is this far past is overdue (its pass runs every 10 s).
RECURRING_OVERDUE_MS = 60_000
_BY_NAME: dict[str, MetricName] = {metric.name: metric for metric in VIEW_METRICS}


def _family(name: str) -> GaugeMetricFamily:
    metric = _BY_NAME[name]
    return GaugeMetricFamily(metric.name, metric.help, labels=list(metric.labels))


def families(overviews: Iterable[Overview]) -> Iterator[GaugeMetricFamily]:
    """Every view family, with one sample per namespace and label set."""
    made = {name: _family(name) for name in _BY_NAME}
    sizes: dict[str, int] = {}
    for overview in overviews:
        ns = overview.namespace
        for figure in overview.stages:
            made["later_jobs_in_stage"].add_metric([ns, figure.stage], figure.count)
        for queue in overview.queues:
            labels = [ns, queue.queue_name]
            made["later_queue_ready_jobs"].add_metric(labels, queue.ready)
            made["later_queue_running_jobs"].add_metric(labels, queue.running)
            age = 0 if queue.oldest_ready_age_ms is None else queue.oldest_ready_age_ms / 1000
            made["later_queue_oldest_ready_age_seconds"].add_metric(labels, age)
            made["later_queue_paused"].add_metric(labels, int(queue.paused_at_ms is not None))
        for topic in overview.topics:
            made["later_topic_backlog_jobs"].add_metric([ns, topic.topic], topic.backlog)
            made["later_topic_blocked_heads"].add_metric([ns, topic.topic], topic.blocked_heads)
        for state, count in overview.workflows.items():
            made["later_workflows"].add_metric([ns, state], count)
        workers = overview.workers
        made["later_workers_live"].add_metric([ns], len(workers))
        made["later_workers_threads"].add_metric([ns], sum(w.concurrency for w in workers))
        made["later_workers_busy_threads"].add_metric([ns], sum(w.busy for w in workers))
        for lag in overview.consumer_lags:
            made["later_consumer_group_lag_records"].add_metric(
                [ns, lag.group, lag.topic, str(lag.partition_id)], lag.lag
            )
        overdue_before = overview.now_ms - RECURRING_OVERDUE_MS
        overdue = sum(
            1
            for item in overview.recurring
            if item.next_run_ms is not None and item.next_run_ms < overdue_before
        )
        made["later_recurring_overdue"].add_metric([ns], overdue)
        if overview.db_size_bytes is not None:
            sizes[overview.using] = overview.db_size_bytes
    for using, size in sizes.items():
        made["later_database_size_bytes"].add_metric([using], size)
    yield from made.values()


class _Figures(Collector):
    def __init__(self, overviews: list[Overview]) -> None:
        self._overviews = overviews

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return families(self._overviews)


def render(namespaces: Iterable[str], using: str | None = None) -> bytes:
    """The text exposition of ``namespaces`` on ``using`` (default ``LATER["DATABASE"]``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Figures([read_overview(using, namespace) for namespace in namespaces]))
    return generate_latest(registry)
