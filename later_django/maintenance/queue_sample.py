"""The ``queue_sample`` pass (looked at every 10 s, runs once a minute): one
``later_queue_samples`` row per namespace and minute."""

from __future__ import annotations

from later_django.core.clock import MINUTE_MS, minute_bucket, now_ms
from later_django.maintenance.definition import MaintenancePass, PassContext


def minute_not_sampled(context: PassContext) -> bool:
    """A read: has the current minute no queue sample yet?"""
    now = now_ms()
    samples = context.stores.metrics.queue_samples_since(context.namespace, now)
    return not any(sample.at_ms == minute_bucket(now) * MINUTE_MS for sample in samples)


def sample_queue(context: PassContext) -> int:
    """Records this minute's ``(queued, partitioned)`` reading (replacing one of the same
    minute) and trims readings older than a week; returns 1."""
    metrics = context.stores.metrics
    queued, partitioned = metrics.queue_sample_counts(context.namespace)
    metrics.record_queue_sample(context.namespace, now_ms(), queued, partitioned)
    return 1


QUEUE_SAMPLE = MaintenancePass(
    "queue_sample",
    10.0,
    sample_queue,
    max_run_seconds=5.0,
    wanted=minute_not_sampled,
    unit=("sample written", "samples written"),
)
