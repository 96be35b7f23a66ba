"""Transition, wait and attempt metrics, folded in memory and written as one batch.

Every committed stage move, and every attempt's end (its task, queue, outcome, error
class and duration: the per-task and per-queue figures), adds to a per-process accumulator, keyed by
(namespace, database alias) and by minute; :func:`flush` writes what was
gathered with one statement per metric table and empties it. Workers flush
about once a second and when they stop; other processes (web servers that
enqueue) flush at most once a second, from the commit that follows the
interval, and at exit.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from later_django.core.clock import MINUTE_MS, minute_bucket
from later_django.core.duration_histogram import bucket_of
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexMetricsBatch, TaskMinuteSample

logger = logging.getLogger("later_django.metrics")

#: Flush at most this often from processes that only enqueue.
ENQUEUE_SIDE_FLUSH_SECONDS = 1.0


#: An attempt's end: ``(task_path, outcome, error_class, duration_ms or None, job_id,
#: at_ms, queue_name)``; a plain tuple, made once per attempt on the worker's path.
AttemptSample = tuple[str, str, str, float | None, str, int, str]
#: The key of an attempt row in memory: ``(task_path, queue_name, outcome, error_class,
#: minute, duration_bucket)``.
_AttemptKey = tuple[str, str, str, str, int, int]


@dataclass
class MetricsBatch:
    """Samples gathered for one transaction: ``(stage, at_ms)``, ``(mode, wait_ms, at_ms)``
    and :data:`AttemptSample`."""

    transitions: list[tuple[str, int]] = field(default_factory=list)
    waits: list[tuple[str, int, int]] = field(default_factory=list)
    attempts: list[AttemptSample] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.transitions and not self.waits and not self.attempts


class MetricsAccumulator:
    """Thread-safe per-minute sums, per (namespace, alias)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (ns, alias) -> {(stage, minute): count}
        self._transitions: dict[tuple[str, str], dict[tuple[str, int], int]] = defaultdict(
            lambda: defaultdict(int)
        )
        # (ns, alias) -> {(mode, minute): [count, sum, max]}
        self._waits: dict[tuple[str, str], dict[tuple[str, int], list[int]]] = defaultdict(dict)
        # (ns, alias) -> {_AttemptKey: [count, sum_ms, max_ms, newest job id]}
        self._attempts: dict[tuple[str, str], dict[_AttemptKey, list[Any]]] = defaultdict(dict)
        self._last_flush = time.monotonic()

    def add(self, namespace: str, using: str, batch: MetricsBatch) -> None:
        self._add_sums(
            namespace,
            using,
            [(stage, at_ms, 1) for stage, at_ms in batch.transitions],
            [(mode, at_ms, 1, wait_ms, wait_ms) for mode, wait_ms, at_ms in batch.waits],
        )
        if batch.attempts:
            self._add_attempts(
                namespace,
                using,
                (
                    (
                        (
                            task_path,
                            queue_name,
                            outcome,
                            error_class,
                            minute_bucket(at_ms),
                            bucket_of(duration_ms),
                        ),
                        1,
                        duration_ms or 0,
                        duration_ms or 0,
                        job_id,
                    )
                    for task_path, outcome, error_class, duration_ms, job_id, at_ms, queue_name in (
                        batch.attempts
                    )
                ),
            )

    def _add_attempts(
        self,
        namespace: str,
        using: str,
        sums: Iterable[tuple[_AttemptKey, int, float, float, str]],
    ) -> None:
        """Adds ``(key, count, sum_ms, max_ms, sample_job_id)`` sums; sums and maxima stay
        fractions of a millisecond here (the store rounds them when it writes), so
        sub-millisecond attempts add up."""
        with self._lock:
            rows = self._attempts[(namespace, using)]
            for key, count, total, longest, job_id in sums:
                entry = rows.get(key)
                if entry is None:
                    rows[key] = [count, total, longest, job_id]
                else:
                    entry[0] += count
                    entry[1] += total
                    entry[2] = max(entry[2], longest)
                    entry[3] = max(entry[3], job_id)

    def _add_sums(
        self,
        namespace: str,
        using: str,
        transitions: list[tuple[str, int, int]],
        waits: list[tuple[str, int, int, int, int]],
    ) -> None:
        """Adds ``(stage, at_ms, count)`` and ``(mode, at_ms, count, sum_ms, max_ms)``."""
        with self._lock:
            counts = self._transitions[(namespace, using)]
            for stage, at_ms, count in transitions:
                counts[(stage, minute_bucket(at_ms))] += count
            sums = self._waits[(namespace, using)]
            for mode, at_ms, count, total, longest in waits:
                entry = sums.setdefault((mode, minute_bucket(at_ms)), [0, 0, 0])
                entry[0] += count
                entry[1] += total
                entry[2] = max(entry[2], longest)

    def take(self) -> dict[tuple[str, str], JobIndexMetricsBatch]:
        """Empties the accumulator; returns one storage batch per (namespace, alias)."""
        with self._lock:
            transitions, self._transitions = (
                self._transitions,
                defaultdict(lambda: defaultdict(int)),
            )
            waits, self._waits = self._waits, defaultdict(dict)
            attempts, self._attempts = self._attempts, defaultdict(dict)
            self._last_flush = time.monotonic()
        batches: dict[tuple[str, str], JobIndexMetricsBatch] = {}
        for target in set(transitions) | set(waits) | set(attempts):
            batch = JobIndexMetricsBatch()
            for (stage, minute), count in sorted(transitions.get(target, {}).items()):
                batch.transitions.append((stage, minute * MINUTE_MS, count))
            for (mode, minute), (count, total, longest) in sorted(waits.get(target, {}).items()):
                batch.waits.append((mode, minute * MINUTE_MS, count, total, longest))
            for (task_path, queue_name, outcome, error_class, minute, bucket), (
                count,
                total,
                longest,
                sample,
            ) in sorted(attempts.get(target, {}).items()):
                batch.task_minutes.append(
                    TaskMinuteSample(
                        task_path,
                        outcome,
                        error_class,
                        minute * MINUTE_MS,
                        bucket,
                        count,
                        total,
                        longest,
                        sample,
                        queue_name,
                    )
                )
            if batch.transitions or batch.waits or batch.task_minutes:
                batches[target] = batch
        return batches

    def restore(self, batches: dict[tuple[str, str], JobIndexMetricsBatch]) -> None:
        """Puts back batches that could not be written (the database was away)."""
        for (namespace, using), batch in batches.items():
            self._add_sums(namespace, using, batch.transitions, batch.waits)
            self._add_attempts(
                namespace,
                using,
                (
                    (
                        (
                            row.task_path,
                            row.queue_name,
                            row.outcome,
                            row.error_class,
                            minute_bucket(row.at_ms),
                            row.duration_bucket,
                        ),
                        row.attempts,
                        row.sum_ms,
                        row.max_ms,
                        row.sample_job_id,
                    )
                    for row in batch.task_minutes
                ),
            )

    def seconds_since_flush(self) -> float:
        return time.monotonic() - self._last_flush


accumulator = MetricsAccumulator()


def flush() -> int:
    """Writes everything gathered (one statement per metric table per target);
    returns the number of targets written. On a database error the samples are
    kept for the next flush and the error is raised."""
    batches = accumulator.take()
    written = 0
    try:
        for (namespace, using), batch in list(batches.items()):
            stores_for(using).metrics.record_batch(namespace, batch)
            del batches[(namespace, using)]
            written += 1
    finally:
        if batches:
            accumulator.restore(batches)
    return written


def flush_if_due() -> None:
    """Flushes when the last flush is older than ``ENQUEUE_SIDE_FLUSH_SECONDS``;
    errors are logged, never raised (this runs after a caller's commit)."""
    if accumulator.seconds_since_flush() < ENQUEUE_SIDE_FLUSH_SECONDS:
        return
    try:
        flush()
    except Exception:
        logger.warning(
            "could not write job metrics; they are kept for the next flush", exc_info=True
        )


def _flush_at_exit() -> None:
    try:
        flush()
    except Exception:
        logger.warning("could not write job metrics at exit", exc_info=True)


atexit.register(_flush_at_exit)
