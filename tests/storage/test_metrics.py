"""Throughput and wait metrics, and the queue-length history (``JobIndexStore``)."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from later_django.core.clock import MINUTE_MS
from later_django.models import JobTransitionMetric, JobWaitMetric
from later_django.storage.stores import stores_for
from later_django.storage.types import (
    METRIC_RETENTION_MINUTES,
    QUEUE_SAMPLE_RETENTION_MINUTES,
    JobIndexMetricsBatch,
    JobIndexWaitStats,
    QueueSample,
)
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

#: 30 s into a minute, so "now" and "now - 1 minute" are the current and previous buckets.
MINUTE_START = 29_000_000 * MINUTE_MS
NOW = MINUTE_START + 30_000


def transitions(*samples: tuple[str, int, int]) -> JobIndexMetricsBatch:
    return JobIndexMetricsBatch(transitions=list(samples))


def waits(*samples: tuple[str, int, int, int, int]) -> JobIndexMetricsBatch:
    return JobIndexMetricsBatch(waits=list(samples))


def test_a_batch_adds_up_samples_of_one_minute_in_one_statement_per_table(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    batch = JobIndexMetricsBatch(
        transitions=[
            ("success", NOW, 1),
            ("success", NOW + 10_000, 2),
            ("failed", NOW, 1),
            ("success", NOW - MINUTE_MS, 5),
        ],
        waits=[
            ("regular", NOW, 2, 300, 200),
            ("regular", NOW + 1_000, 1, 50, 50),
            ("sequential", NOW, 1, 9, 9),
        ],
    )

    with CaptureQueriesContext(connections[db_alias]) as captured:
        store.record_batch("ns", batch)

    statements = [q["sql"] for q in captured.captured_queries]
    assert sum("INSERT INTO later_job_transition_metrics" in sql for sql in statements) == 1
    assert sum("INSERT INTO later_job_wait_metrics" in sql for sql in statements) == 1
    stored = set(
        JobTransitionMetric.objects.using(db_alias).values_list("stage", "minute_bucket", "count")
    )
    bucket = NOW // MINUTE_MS
    assert stored == {("success", bucket, 3), ("failed", bucket, 1), ("success", bucket - 1, 5)}
    assert set(
        JobWaitMetric.objects.using(db_alias).values_list("mode", "count", "sum_ms", "max_ms")
    ) == {("regular", 3, 350, 200), ("sequential", 1, 9, 9)}


def test_an_empty_batch_writes_nothing(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    with CaptureQueriesContext(connections[db_alias]) as captured:
        store.record_batch("ns", JobIndexMetricsBatch())
    assert captured.captured_queries == []


def test_recent_transitions_are_the_current_and_previous_minute_only(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    store.record_batch(
        "ns",
        transitions(
            ("success", NOW, 4),
            ("success", MINUTE_START, 1),
            ("success", NOW - MINUTE_MS, 2),
            ("success", NOW - 2 * MINUTE_MS, 100),
            ("success", NOW + MINUTE_MS, 1_000),
            ("failed", NOW, 7),
        ),
    )
    # Flushes add to the buckets already written.
    store.record_batch("ns", transitions(("success", NOW, 10)))

    assert store.recent_transition_count("ns", "success", NOW) == 4 + 1 + 2 + 10
    assert store.recent_transition_count("ns", "failed", NOW) == 7
    assert store.recent_transition_count("ns", "running", NOW) == 0
    assert store.recent_transition_count("other", "success", NOW) == 0


def test_recent_wait_stats_give_count_average_and_max(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    store.record_batch(
        "ns",
        waits(
            ("regular", NOW, 2, 300, 200),
            ("regular", NOW - MINUTE_MS, 1, 501, 501),
            ("regular", NOW - 2 * MINUTE_MS, 1, 10_000, 10_000),
            ("sequential", NOW, 1, 7, 7),
        ),
    )

    assert store.recent_wait_stats("ns", "regular", NOW) == JobIndexWaitStats(
        count=3, avg_ms=801 // 3, max_ms=501
    )
    assert store.recent_wait_stats("ns", "sequential", NOW) == JobIndexWaitStats(
        count=1, avg_ms=7, max_ms=7
    )


def test_the_wait_max_of_a_minute_is_the_largest_of_every_flush(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    store.record_batch("ns", waits(("regular", NOW, 1, 100, 100)))
    store.record_batch("ns", waits(("regular", NOW, 1, 50, 50)))
    assert store.recent_wait_stats("ns", "regular", NOW).max_ms == 100

    store.record_batch("ns", waits(("regular", NOW, 1, 300, 300)))
    assert store.recent_wait_stats("ns", "regular", NOW) == JobIndexWaitStats(
        count=3, avg_ms=150, max_ms=300
    )


def test_wait_stats_are_zero_without_samples(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    store.record_batch("other", waits(("regular", NOW, 1, 100, 100)))
    assert store.recent_wait_stats("ns", "regular", NOW) == JobIndexWaitStats(0, 0, 0)


def test_the_sweep_deletes_metric_buckets_older_than_the_retention(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    ages = [0, 1, METRIC_RETENTION_MINUTES, METRIC_RETENTION_MINUTES + 1, 60]
    for namespace in ("ns", "other"):
        store.record_batch(
            namespace,
            JobIndexMetricsBatch(
                transitions=[("success", NOW - age * MINUTE_MS, 1) for age in ages],
                waits=[("regular", NOW - age * MINUTE_MS, 1, 5, 5) for age in ages],
            ),
        )

    assert stores_for(db_alias).index.job_index_sweep_expired("ns", NOW, 100) == 0, (
        "no index rows to remove"
    )

    bucket = NOW // MINUTE_MS
    kept = {bucket - age for age in ages if age <= METRIC_RETENTION_MINUTES}
    for model in (JobTransitionMetric, JobWaitMetric):
        rows = model.objects.using(db_alias)
        assert set(rows.filter(namespace="ns").values_list("minute_bucket", flat=True)) == kept
        assert rows.filter(namespace="other").count() == len(ages), "another namespace is kept"


def test_a_queue_sample_replaces_the_earlier_reading_of_its_minute(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    store.record_queue_sample("ns", NOW, 5, 1)
    store.record_queue_sample("ns", NOW + 20_000, 7, 2)
    store.record_queue_sample("other", NOW, 99, 99)

    assert store.queue_samples_since("ns", NOW) == [
        QueueSample(at_ms=MINUTE_START, queued=7, partitioned=2)
    ]


def test_queue_samples_older_than_a_week_are_trimmed(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    week_ms = QUEUE_SAMPLE_RETENTION_MINUTES * MINUTE_MS
    store.record_queue_sample("ns", NOW, 1, 0)
    store.record_queue_sample("other", NOW, 1, 0)
    store.record_queue_sample("ns", NOW + week_ms, 2, 0)
    assert [s.queued for s in store.queue_samples_since("ns", 0)] == [1, 2], (
        "a reading exactly a week old is kept"
    )

    store.record_queue_sample("ns", NOW + week_ms + MINUTE_MS, 3, 0)

    assert [s.queued for s in store.queue_samples_since("ns", 0)] == [2, 3]
    assert len(store.queue_samples_since("other", 0)) == 1, "another namespace is kept"


def test_queue_samples_since_are_oldest_first_from_the_minute_of_since(db_alias: str) -> None:
    store = stores_for(db_alias).metrics
    for minutes, queued in [(2, 30), (0, 10), (-1, 0), (1, 20)]:
        store.record_queue_sample("ns", MINUTE_START + minutes * MINUTE_MS + 5_000, queued, 1)

    samples = store.queue_samples_since("ns", NOW)

    assert samples == [
        QueueSample(at_ms=MINUTE_START + minutes * MINUTE_MS, queued=queued, partitioned=1)
        for minutes, queued in [(0, 10), (1, 20), (2, 30)]
    ]
    assert store.queue_samples_since("ns", NOW + 3 * MINUTE_MS) == []
