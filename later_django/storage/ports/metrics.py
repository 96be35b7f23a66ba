"""The metrics port: minute buckets of transitions, waits and attempts; queue-length history.

``MetricsPort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from later_django.storage.types import (
    FailureGroup,
    JobIndexMetricsBatch,
    JobIndexWaitStats,
    QueueAttempts,
    QueueSample,
    TaskOutcomeSums,
)


@runtime_checkable
class MetricsPort(Protocol):
    """Minute buckets of stage transitions and waits, and the queue-length history. Implemented
    by :class:`~later_django.storage.metrics.MetricsStore`."""

    def record_batch(self, namespace: str, batch: JobIndexMetricsBatch) -> None:
        """Adds a batch: samples of one key (stage or mode, minute bucket; a task's minute key)
        are summed first (a max is the max), then one upsert per metric table that has rows,
        atomically."""

    def task_outcome_sums(
        self, namespace: str, first_bucket: int, last_bucket: int, task_path: str | None = None
    ) -> list[TaskOutcomeSums]:
        """The attempts of the minute buckets ``first_bucket`` … ``last_bucket`` summed per
        (task, outcome, duration bucket), of every task or of ``task_path`` only; one grouped
        read of the window's rows."""

    def queue_attempts(
        self, namespace: str, first_bucket: int, last_bucket: int
    ) -> list[QueueAttempts]:
        """The succeeded and the failing attempts of the minute buckets ``first_bucket`` …
        ``last_bucket`` per queue, by queue name; queues without either are absent. One
        grouped read of the window's rows."""

    def task_throughput(
        self,
        namespace: str,
        task_path: str,
        first_bucket: int,
        last_bucket: int,
        slot_minutes: int,
    ) -> list[tuple[int, str, int]]:
        """``(slot, outcome, attempts)`` of ``task_path`` in the window, slot = minute bucket
        // ``slot_minutes``, by slot then outcome; slots without attempts are absent."""

    def failure_groups(
        self,
        namespace: str,
        first_bucket: int,
        last_bucket: int,
        limit: int,
        task_path: str | None = None,
    ) -> list[FailureGroup]:
        """The failing attempts (retried, failed, timed out) of the window per (task, error
        class), the most first (then by task and class), at most ``limit`` groups, of every
        task or of ``task_path`` only; one grouped read of the window's rows."""

    def sweep_task_minutes(self, namespace: str, now_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` attempt rows of the namespace older than
        ``METRIC_RETENTION_MINUTES`` before ``now_ms`` (one bounded statement); returns how
        many."""

    def recent_transition_count(self, namespace: str, stage: str, now_ms: int) -> int:
        """Transitions into ``stage`` in the minute bucket of ``now_ms`` and the one before."""

    def recent_wait_stats(self, namespace: str, mode: str, now_ms: int) -> JobIndexWaitStats:
        """Count, integer average and max wait for ``mode`` over the minute bucket of ``now_ms``
        and the one before; zeros when there was none."""

    def record_queue_sample(
        self, namespace: str, at_ms: int, queued: int, partitioned: int
    ) -> None:
        """Records the reading of the minute containing ``at_ms`` (replacing an earlier one of
        that minute) and trims readings older than ``QUEUE_SAMPLE_RETENTION_MINUTES``, in one
        transaction."""

    def queue_sample_counts(self, namespace: str) -> tuple[int, int]:
        """``(queued, partitioned)`` now, for a queue sample: the ready depth of the namespace's
        queues and the partitioned queued jobs
        (the ``enqueued`` counter); O(1), from the counters. A counter that dips below zero
        under reordering reads as 0."""

    def queue_samples_since(self, namespace: str, since_ms: int) -> list[QueueSample]:
        """Readings from the minute containing ``since_ms`` on, oldest first; ``at_ms`` is the
        start of the reading's minute."""
