"""``MetricsStore``: the dashboard's minute buckets of stage transitions and queue
waits (``later_job_transition_metrics``, ``later_job_wait_metrics``), the attempts
per task (``later_task_minute``), and the queue-length history (``later_queue_samples``).

Writes are upserts of whole minute buckets, so a flush is one statement per table
whatever the number of jobs; reads cover the current and the previous minute (or the
readings since a minute) and cost what they return. The statements are the job
index family's (:class:`~later_django.storage.queries.index.IndexQueries`) and, for the
attempts, :class:`~later_django.storage.queries.task_metrics.TaskMetricQueries`; the
sweep pass removes the buckets older than ``METRIC_RETENTION_MINUTES`` (the attempt
rows in bounded deletes, :meth:`MetricsStore.sweep_task_minutes`).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from later_django.core.clock import MINUTE_MS, minute_bucket
from later_django.storage.driver import Driver
from later_django.storage.queries.index import IndexQueries
from later_django.storage.queries.task_metrics import TaskMetricQueries
from later_django.storage.types import (
    METRIC_RETENTION_MINUTES,
    QUEUE_SAMPLE_RETENTION_MINUTES,
    FailureGroup,
    JobIndexMetricsBatch,
    JobIndexWaitStats,
    QueueAttempts,
    QueueSample,
    TaskOutcomeSums,
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


def _task_minute_rows(batch: JobIndexMetricsBatch) -> list[dict[str, Any]]:
    """The batch's attempts summed per ``later_task_minute`` key (max and sample job id
    are the largest), in key order: one row per key, as one upsert needs."""
    totals: dict[tuple[int, str, str, str, str, int], list[Any]] = {}
    for sample in batch.task_minutes:
        key = (
            minute_bucket(sample.at_ms),
            sample.task_path,
            sample.queue_name,
            sample.outcome,
            sample.error_class,
            sample.duration_bucket,
        )
        seen = totals.get(key)
        if seen is None:
            totals[key] = [sample.attempts, sample.sum_ms, sample.max_ms, sample.sample_job_id]
        else:
            seen[0] += sample.attempts
            seen[1] += sample.sum_ms
            seen[2] = max(seen[2], sample.max_ms)
            seen[3] = max(seen[3], sample.sample_job_id)
    return [
        {
            "minute_bucket": bucket,
            "task_path": task_path,
            "queue_name": queue_name,
            "outcome": outcome,
            "error_class": error_class,
            "duration_bucket": duration_bucket,
            "count": count,
            "sum_ms": round(sum_ms),
            "max_ms": round(max_ms),
            "sample_job_id": sample_job_id,
        }
        for (bucket, task_path, queue_name, outcome, error_class, duration_bucket), (
            count,
            sum_ms,
            max_ms,
            sample_job_id,
        ) in sorted(totals.items())
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
        self._tasks = driver.queries(TaskMetricQueries)

    # --- metrics ---

    def record_batch(self, namespace: str, batch: JobIndexMetricsBatch) -> None:
        """Adds a batch: samples of one key (stage or mode, minute bucket; a task's
        minute key) are summed first (a max is the max), then one upsert per metric
        table that has rows, atomically."""
        writes = [
            (statement, rows)
            for statement, rows in (
                (self._q.record_transitions, _transition_rows(batch)),
                (self._q.record_waits, _wait_rows(batch)),
                (self._tasks.record, _task_minute_rows(batch)),
            )
            if rows
        ]
        shared = {"namespace": namespace}
        with self._driver.atomic() if len(writes) > 1 else nullcontext():
            for statement, rows in writes:
                self._driver.execute_rows(statement, rows, shared)

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

    # --- attempts per task ---

    def task_outcome_sums(
        self, namespace: str, first_bucket: int, last_bucket: int, task_path: str | None = None
    ) -> list[TaskOutcomeSums]:
        """The attempts of the minute buckets ``first_bucket`` … ``last_bucket`` summed
        per (task, outcome, duration bucket), of every task or of ``task_path`` only;
        one grouped read of the window's rows."""
        params = {"namespace": namespace, "first_bucket": first_bucket, "last_bucket": last_bucket}
        statement = self._tasks.outcome_sums
        if task_path is not None:
            statement, params = self._tasks.outcome_sums_of_task, {**params, "task_path": task_path}
        return [
            TaskOutcomeSums(task, outcome, int(bucket), int(count), int(sum_ms), int(max_ms))
            for task, outcome, bucket, count, sum_ms, max_ms in self._driver.fetch_all(
                statement, params
            )
        ]

    def queue_attempts(
        self, namespace: str, first_bucket: int, last_bucket: int
    ) -> list[QueueAttempts]:
        """The succeeded and the failing attempts of the minute buckets ``first_bucket``
        … ``last_bucket`` per queue, by queue name; queues without either are absent.
        One grouped read of the window's rows."""
        params = {"namespace": namespace, "first_bucket": first_bucket, "last_bucket": last_bucket}
        return [
            QueueAttempts(queue_name, int(succeeded), int(failing))
            for queue_name, succeeded, failing in self._driver.fetch_all(
                self._tasks.queue_attempts, params
            )
        ]

    def task_throughput(
        self,
        namespace: str,
        task_path: str,
        first_bucket: int,
        last_bucket: int,
        slot_minutes: int,
    ) -> list[tuple[int, str, int]]:
        """``(slot, outcome, attempts)`` of ``task_path`` in the window, slot = minute
        bucket // ``slot_minutes``, by slot then outcome; slots without attempts are absent."""
        params = {
            "namespace": namespace,
            "task_path": task_path,
            "first_bucket": first_bucket,
            "last_bucket": last_bucket,
            "slot_minutes": slot_minutes,
        }
        return [
            (int(slot), outcome, int(count))
            for slot, outcome, count in self._driver.fetch_all(
                self._tasks.throughput_of_task, params
            )
        ]

    def failure_groups(
        self,
        namespace: str,
        first_bucket: int,
        last_bucket: int,
        limit: int,
        task_path: str | None = None,
    ) -> list[FailureGroup]:
        """The failing attempts (retried, failed, timed out) of the window per (task,
        error class), the most first (then by task and class), at most ``limit`` groups,
        of every task or of ``task_path`` only; one grouped read of the window's rows."""
        params = {
            "namespace": namespace,
            "first_bucket": first_bucket,
            "last_bucket": last_bucket,
            "limit": limit,
        }
        statement = self._tasks.failure_groups
        if task_path is not None:
            statement = self._tasks.failure_groups_of_task
            params["task_path"] = task_path
        return [
            FailureGroup(
                task_path=task,
                error_class=error_class,
                count=int(count),
                first_minute_ms=int(first) * MINUTE_MS,
                last_minute_ms=int(last) * MINUTE_MS,
                sample_job_id=sample or "",
            )
            for task, error_class, count, first, last, sample in self._driver.fetch_all(
                statement, params
            )
        ]

    def sweep_task_minutes(self, namespace: str, now_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` attempt rows of the namespace older than
        ``METRIC_RETENTION_MINUTES`` before ``now_ms`` (one bounded statement); returns
        how many."""
        if limit < 1:
            return 0
        params = {
            "namespace": namespace,
            "before_bucket": minute_bucket(now_ms) - METRIC_RETENTION_MINUTES,
            "limit": limit,
        }
        return self._driver.execute(self._tasks.sweep, params)

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
