"""``MetricsStore``: the dashboard's minute buckets of stage transitions and queue
waits (``later_job_transition_metrics``, ``later_job_wait_metrics``) and the
queue-length history (``later_queue_samples``).

Writes are upserts of whole minute buckets, so a flush is one statement per table
whatever the number of jobs; reads cover the current and the previous minute (or the
readings since a minute) and cost what they return. The statements are the job
index family's (:class:`~later_django.storage.queries.index.IndexQueries`); the
index's sweep removes the buckets older than ``METRIC_RETENTION_MINUTES``.
"""

from __future__ import annotations

from typing import Any

from later_django.core.clock import MINUTE_MS, minute_bucket
from later_django.storage.driver import Driver
from later_django.storage.queries.index import IndexQueries
from later_django.storage.types import (
    QUEUE_SAMPLE_RETENTION_MINUTES,
    JobIndexMetricsBatch,
    JobIndexWaitStats,
    QueueSample,
)


def _transition_rows(batch: JobIndexMetricsBatch) -> list[dict[str, Any]]:
    """The batch's transitions summed per (stage, minute bucket), in key order."""
    totals: dict[tuple[str, int], int] = {}
    for stage, at_ms, count in batch.transitions:
        key = (stage, minute_bucket(at_ms))
        totals[key] = totals.get(key, 0) + count
    return [
        {"stage": stage, "minute_bucket": bucket, "count": totals[(stage, bucket)]}
        for stage, bucket in sorted(totals)
    ]


def _wait_rows(batch: JobIndexMetricsBatch) -> list[dict[str, Any]]:
    """The batch's waits summed per (mode, minute bucket) (max is the max), in key order."""
    totals: dict[tuple[str, int], tuple[int, int, int]] = {}
    for mode, at_ms, count, sum_ms, max_ms in batch.waits:
        key = (mode, minute_bucket(at_ms))
        seen = totals.get(key, (0, 0, max_ms))
        totals[key] = (seen[0] + count, seen[1] + sum_ms, max(seen[2], max_ms))
    return [
        {"mode": mode, "minute_bucket": bucket, "count": c, "sum_ms": s, "max_ms": m}
        for (mode, bucket), (c, s, m) in sorted(totals.items())
    ]


def _recent_buckets(now: int) -> dict[str, int]:
    """The minute bucket of ``now`` and the one before, as statement parameters."""
    current = minute_bucket(now)
    return {"first_bucket": current - 1, "last_bucket": current}


class MetricsStore:
    """Metric buckets and queue samples on one driver's connection."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(IndexQueries)

    # --- metrics ---

    def record_batch(self, namespace: str, batch: JobIndexMetricsBatch) -> None:
        """Adds a batch: samples of one key (stage or mode, minute bucket) are summed
        first (wait max is the max), then one upsert per metric table, atomically."""
        transitions, waits = _transition_rows(batch), _wait_rows(batch)
        shared = {"namespace": namespace}
        if transitions and waits:
            with self._driver.atomic():
                self._driver.execute_rows(self._q.record_transitions, transitions, shared)
                self._driver.execute_rows(self._q.record_waits, waits, shared)
        elif transitions:
            self._driver.execute_rows(self._q.record_transitions, transitions, shared)
        elif waits:
            self._driver.execute_rows(self._q.record_waits, waits, shared)

    def recent_transition_count(self, namespace: str, stage: str, now_ms: int) -> int:
        """Transitions into ``stage`` in the minute bucket of ``now_ms`` and the one before."""
        params = {"namespace": namespace, "stage": stage, **_recent_buckets(now_ms)}
        row = self._driver.fetch_one(self._q.recent_transition_count, params)
        return int(row[0]) if row else 0

    def recent_wait_stats(self, namespace: str, mode: str, now_ms: int) -> JobIndexWaitStats:
        """Count, integer average and max wait for ``mode`` over the minute bucket of
        ``now_ms`` and the one before; zeros when there was none."""
        params = {"namespace": namespace, "mode": mode, **_recent_buckets(now_ms)}
        row = self._driver.fetch_one(self._q.recent_wait_stats, params)
        count, sum_ms, max_ms = (int(value) for value in row) if row else (0, 0, 0)
        return JobIndexWaitStats(count=count, avg_ms=sum_ms // count if count else 0, max_ms=max_ms)

    # --- queue-length history ---

    def record_queue_sample(
        self, namespace: str, at_ms: int, queued: int, partitioned: int
    ) -> None:
        """Records the reading of the minute containing ``at_ms`` (replacing an earlier
        one of that minute) and trims readings older than
        ``QUEUE_SAMPLE_RETENTION_MINUTES``, in one transaction."""
        bucket = minute_bucket(at_ms)
        reading = {
            "namespace": namespace,
            "bucket": bucket,
            "queued": queued,
            "partitioned": partitioned,
        }
        trim = {"namespace": namespace, "before_bucket": bucket - QUEUE_SAMPLE_RETENTION_MINUTES}
        with self._driver.atomic():
            self._driver.execute(self._q.queue_sample_upsert, reading)
            self._driver.execute(self._q.queue_sample_trim, trim)

    def queue_sample_counts(self, namespace: str) -> tuple[int, int]:
        """``(queued, partitioned)`` now, for a queue sample: the ready depth of the
        namespace's queues and the
        partitioned queued jobs (the ``enqueued`` counter); O(1), from the counters.
        A counter that dips below zero under reordering reads as 0."""
        row = self._driver.fetch_one(self._q.queue_sample_counts, {"namespace": namespace})
        queued, partitioned = (int(value or 0) for value in row) if row else (0, 0)
        return max(queued, 0), max(partitioned, 0)

    def queue_samples_since(self, namespace: str, since_ms: int) -> list[QueueSample]:
        """Readings from the minute containing ``since_ms`` on, oldest first; ``at_ms``
        is the start of the reading's minute."""
        params = {"namespace": namespace, "since_bucket": minute_bucket(since_ms)}
        return [
            QueueSample(at_ms=bucket * MINUTE_MS, queued=queued, partitioned=partitioned)
            for bucket, queued, partitioned in self._driver.fetch_all(
                self._q.queue_samples_since, params
            )
        ]
