"""Attempts per task and queue (``later_task_minute``): the flush's upsert and the window
reads."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from later_django.core.clock import MINUTE_MS
from later_django.models import TaskMinuteMetric
from later_django.storage.stores import stores_for
from later_django.storage.types import (
    METRIC_RETENTION_MINUTES,
    FailureGroup,
    JobIndexMetricsBatch,
    QueueAttempts,
    TaskMinuteSample,
    TaskOutcomeSums,
)
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

MINUTE = 29_000_000
NOW = MINUTE * MINUTE_MS + 30_000
ADD, SEND = "app.tasks.add", "app.tasks.send"
BOOM = "builtins.RuntimeError"


def sample(
    task: str = ADD,
    outcome: str = "succeeded",
    error: str = "",
    at_ms: int = NOW,
    bucket: int = 10,
    attempts: int = 1,
    sum_ms: float = 5,
    max_ms: float = 5,
    job_id: str = "",
    queue: str = "default",
) -> TaskMinuteSample:
    return TaskMinuteSample(
        task, outcome, error, at_ms, bucket, attempts, sum_ms, max_ms, job_id, queue
    )


def record(alias: str, *samples: TaskMinuteSample, namespace: str = "ns") -> None:
    stores_for(alias).metrics.record_batch(namespace, JobIndexMetricsBatch(task_minutes=[*samples]))


def test_a_flush_is_one_upsert_per_table_and_adds_to_the_rows_of_earlier_flushes(
    db_alias: str,
) -> None:
    batch = JobIndexMetricsBatch(
        transitions=[("success", NOW, 2)],
        waits=[("regular", NOW, 2, 10, 6)],
        task_minutes=[
            sample(sum_ms=4.4, max_ms=4.4),
            sample(sum_ms=2.4, max_ms=2.4),  # same key: added up before the write
            sample(outcome="failed", error=BOOM, job_id="01B", sum_ms=7, max_ms=7),
            sample(outcome="failed", error=BOOM, job_id="01A", sum_ms=9, max_ms=9),
        ],
    )
    with CaptureQueriesContext(connections[db_alias]) as captured:
        stores_for(db_alias).metrics.record_batch("ns", batch)
    statements = [query["sql"] for query in captured.captured_queries]
    for table in ("later_job_transition_metrics", "later_job_wait_metrics", "later_task_minute"):
        assert sum(f"INSERT INTO {table}" in sql for sql in statements) == 1, table

    record(db_alias, sample(outcome="failed", error=BOOM, job_id="01C", sum_ms=1, max_ms=1))
    record(db_alias, sample(outcome="failed", error=BOOM, job_id="019", sum_ms=3, max_ms=3))

    rows = {
        (row.outcome, row.error_class): (row.count, row.sum_ms, row.max_ms, row.sample_job_id)
        for row in TaskMinuteMetric.objects.using(db_alias).filter(namespace="ns")
    }
    assert rows == {
        ("succeeded", ""): (2, 7, 4, ""),  # 6.8 ms summed, rounded once
        ("failed", BOOM): (4, 20, 9, "01C"),  # the newest (highest) job id is kept
    }
    assert {row.minute_bucket for row in TaskMinuteMetric.objects.using(db_alias)} == {MINUTE}


def test_outcome_sums_cover_the_window_and_the_namespace_only(db_alias: str) -> None:
    record(
        db_alias,
        sample(bucket=3, sum_ms=1, max_ms=1),
        sample(bucket=3, at_ms=NOW - MINUTE_MS, attempts=2, sum_ms=2, max_ms=1),
        sample(bucket=20, outcome="retried", error=BOOM, sum_ms=30, max_ms=30),
        sample(task=SEND, bucket=-1, outcome="failed", error=BOOM, sum_ms=0, max_ms=0),
        sample(at_ms=NOW - 5 * MINUTE_MS, attempts=100),  # before the window
        sample(at_ms=NOW + MINUTE_MS, attempts=100),  # after it
    )
    record(db_alias, sample(attempts=100), namespace="other")
    metrics = stores_for(db_alias).metrics

    every_task = metrics.task_outcome_sums("ns", MINUTE - 1, MINUTE)
    one_task = metrics.task_outcome_sums("ns", MINUTE - 1, MINUTE, SEND)

    assert sorted(every_task, key=lambda row: (row.task_path, row.outcome)) == [
        TaskOutcomeSums(ADD, "retried", 20, 1, 30, 30),
        TaskOutcomeSums(ADD, "succeeded", 3, 3, 3, 1),
        TaskOutcomeSums(SEND, "failed", -1, 1, 0, 0),
    ]
    assert one_task == [TaskOutcomeSums(SEND, "failed", -1, 1, 0, 0)]


def test_the_queue_is_part_of_the_key_and_sums_over_it_are_unchanged(db_alias: str) -> None:
    record(db_alias, sample(queue="emails", attempts=2), sample(attempts=3, sum_ms=9, max_ms=9))
    record(db_alias, sample(queue="emails"))

    rows = {
        row.queue_name: row.count
        for row in TaskMinuteMetric.objects.using(db_alias).filter(namespace="ns")
    }
    assert rows == {"default": 3, "emails": 3}
    sums = stores_for(db_alias).metrics.task_outcome_sums("ns", MINUTE, MINUTE)
    assert sums == [TaskOutcomeSums(ADD, "succeeded", 10, 6, 19, 9)]


def test_queue_attempts_sum_succeeded_and_failing_per_queue_in_the_window(
    db_alias: str,
) -> None:
    record(
        db_alias,
        sample(attempts=2),
        sample(task=SEND, at_ms=NOW - MINUTE_MS, bucket=3),  # first minute of the window
        sample(outcome="retried", error=BOOM, attempts=4),
        sample(outcome="timed_out", error=BOOM, bucket=30),
        sample(outcome="cancelled", attempts=50),  # neither succeeded nor failing
        sample(queue="emails", outcome="failed", error=BOOM, job_id="01A"),
        sample(queue="emails", attempts=7, at_ms=NOW - 2 * MINUTE_MS),  # before the window
        sample(queue="emails", attempts=7, at_ms=NOW + MINUTE_MS),  # after it
        sample(queue="only-cancels", outcome="cancelled"),
    )
    record(db_alias, sample(queue="others", attempts=100), namespace="other")
    metrics = stores_for(db_alias).metrics

    window = metrics.queue_attempts("ns", MINUTE - 1, MINUTE)

    assert window == [
        QueueAttempts("default", succeeded=3, failing=5),
        QueueAttempts("emails", succeeded=0, failing=1),
    ]
    assert window[0].done == 8
    assert metrics.queue_attempts("ns", MINUTE - 1, MINUTE - 1) == [QueueAttempts("default", 1, 0)]
    assert metrics.queue_attempts("ns", MINUTE - 3, MINUTE - 2) == [QueueAttempts("emails", 7, 0)]
    assert metrics.queue_attempts("other", MINUTE, MINUTE) == [QueueAttempts("others", 100, 0)]
    assert metrics.queue_attempts("none", MINUTE - 10, MINUTE + 10) == []


def test_task_throughput_sums_outcomes_per_slot(db_alias: str) -> None:
    first = MINUTE - MINUTE % 10
    record(
        db_alias,
        sample(at_ms=first * MINUTE_MS, attempts=2),
        sample(at_ms=(first + 9) * MINUTE_MS, attempts=3, bucket=4),
        sample(at_ms=(first + 10) * MINUTE_MS, attempts=5),
        sample(at_ms=(first + 10) * MINUTE_MS, outcome="failed", error=BOOM),
        sample(task=SEND, at_ms=first * MINUTE_MS, attempts=50),
    )

    slots = stores_for(db_alias).metrics.task_throughput("ns", ADD, first, first + 19, 10)

    assert slots == [
        (first // 10, "succeeded", 5),
        (first // 10 + 1, "failed", 1),
        (first // 10 + 1, "succeeded", 5),
    ]


def test_failure_groups_count_first_last_and_newest_sample_of_failing_attempts_only(
    db_alias: str,
) -> None:
    timeout = "later_django.exceptions.TaskTimeout"
    record(
        db_alias,
        sample(outcome="retried", error=BOOM, at_ms=NOW - 3 * MINUTE_MS, job_id="01A"),
        sample(outcome="failed", error=BOOM, at_ms=NOW - MINUTE_MS, job_id="01D", bucket=12),
        sample(outcome="failed", error=BOOM, at_ms=NOW - 2 * MINUTE_MS, job_id="01C"),
        sample(outcome="timed_out", error=timeout, job_id="01B", attempts=7),
        sample(task=SEND, outcome="failed", error=BOOM, job_id="01E", attempts=2),
        sample(outcome="succeeded", attempts=50),
        sample(outcome="cancelled", attempts=50),
        sample(outcome="failed", error=BOOM, at_ms=NOW - 10 * MINUTE_MS, attempts=99),
    )
    metrics = stores_for(db_alias).metrics

    groups = metrics.failure_groups("ns", MINUTE - 5, MINUTE, limit=10)

    assert groups == [
        FailureGroup(ADD, timeout, 7, NOW - 30_000, NOW - 30_000, "01B"),
        FailureGroup(ADD, BOOM, 3, NOW - 30_000 - 3 * MINUTE_MS, NOW - 30_000 - MINUTE_MS, "01D"),
        FailureGroup(SEND, BOOM, 2, NOW - 30_000, NOW - 30_000, "01E"),
    ]
    assert metrics.failure_groups("ns", MINUTE - 5, MINUTE, limit=1) == groups[:1]
    assert metrics.failure_groups("ns", MINUTE - 5, MINUTE, limit=10, task_path=SEND) == groups[2:]
    assert metrics.failure_groups("other", MINUTE - 5, MINUTE, limit=10) == []


def test_the_newest_sample_is_the_byte_wise_largest_job_id_whatever_the_case(
    db_alias: str,
) -> None:
    """Job ids compare byte by byte, as Python compares them (``"job-a" > "job-B"``), in a
    flush's upsert and in the failure groups, on every database (not by a collation
    that folds case or sorts letters before their case)."""
    failed = {"outcome": "failed", "error": BOOM}
    record(db_alias, sample(**failed, job_id="job-B"))
    record(db_alias, sample(**failed, job_id="job-a"))
    record(db_alias, sample(**failed, job_id="job-C"))
    (stored,) = TaskMinuteMetric.objects.using(db_alias).filter(namespace="ns", outcome="failed")
    assert stored.sample_job_id == max("job-B", "job-a", "job-C") == "job-a"
    record(db_alias, sample(**failed, job_id="job-Z", at_ms=NOW - MINUTE_MS))
    (group,) = stores_for(db_alias).metrics.failure_groups("ns", MINUTE - 5, MINUTE, limit=10)
    assert group.sample_job_id == "job-a"


def test_the_sweep_deletes_rows_past_the_retention_in_bounded_statements(db_alias: str) -> None:
    stale = NOW - (METRIC_RETENTION_MINUTES + 1) * MINUTE_MS
    record(db_alias, *(sample(at_ms=stale - n * MINUTE_MS) for n in range(5)), sample())
    record(db_alias, sample(at_ms=stale), namespace="other")
    metrics = stores_for(db_alias).metrics

    assert metrics.sweep_task_minutes("ns", NOW, limit=3) == 3
    assert metrics.sweep_task_minutes("ns", NOW, limit=3) == 2
    assert metrics.sweep_task_minutes("ns", NOW, limit=3) == 0

    left = set(TaskMinuteMetric.objects.using(db_alias).values_list("namespace", "minute_bucket"))
    assert left == {("ns", MINUTE), ("other", stale // MINUTE_MS)}
