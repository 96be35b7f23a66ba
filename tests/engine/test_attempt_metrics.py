"""Attempts per task: each attempt's outcome is counted in memory where it is written,
and the metrics flush writes them (``later_task_minute``) with the other metric tables."""

from __future__ import annotations

import time

import pytest
from django.db import DatabaseError, connections
from django.test.utils import CaptureQueriesContext

from later_django.conf import later_settings
from later_django.core import attempts
from later_django.core.clock import MINUTE_MS, now_ms
from later_django.core.duration_histogram import NO_DURATION, bucket_of
from later_django.engine import metrics
from later_django.engine.execution.finish import finish_and_continue
from later_django.engine.execution.lost import record_lost_attempts
from later_django.engine.execution.start import start_batch
from later_django.engine.execution.values import Outcome
from later_django.exceptions import TaskTimeout, WorkerLost, class_path
from later_django.models import TaskMinuteMetric
from later_django.storage.stores import stores_for
from later_django.storage.types import TaskMinuteSample
from tests.engine import tasks
from tests.engine.support import NAMESPACE, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

ADD = tasks.add.module_path
FAIL_ALWAYS = tasks.fail_always.module_path
BOOM = class_path(tasks.Boom)


def attempt_rows(alias: str) -> dict[tuple[str, str, str], int]:
    """Attempts written so far per (task, outcome, error class)."""
    totals: dict[tuple[str, str, str], int] = {}
    for row in TaskMinuteMetric.objects.using(alias).filter(namespace=NAMESPACE):
        key = (row.task_path, row.outcome, row.error_class)
        totals[key] = totals.get(key, 0) + row.count
    return totals


def test_the_accumulator_folds_attempts_per_task_queue_outcome_minute_and_duration_bucket() -> None:
    accumulator = metrics.MetricsAccumulator()
    at = 29_000_000 * MINUTE_MS
    batch = metrics.MetricsBatch(
        attempts=[
            ("t", attempts.SUCCEEDED, "", 3.0, "", at, "q"),
            ("t", attempts.SUCCEEDED, "", 3.1, "", at + 59_999, "q"),
            ("t", attempts.SUCCEEDED, "", 3.0, "", at + MINUTE_MS, "q"),
            ("t", attempts.SUCCEEDED, "", 3.0, "", at, "other"),
            ("t", attempts.FAILED, "E", 40.0, "01A", at, "q"),
            ("t", attempts.FAILED, "E", 41.0, "01C", at, "q"),
            ("t", attempts.FAILED, "E", None, "01B", at, "q"),
        ]
    )
    accumulator.add("ns", "default", batch)

    [(target, taken)] = accumulator.take().items()

    assert target == ("ns", "default")
    three, forty = bucket_of(3.0), bucket_of(40.0)
    assert taken.task_minutes == [
        TaskMinuteSample("t", attempts.SUCCEEDED, "", at, three, 1, 3.0, 3.0, "", "other"),
        TaskMinuteSample("t", attempts.FAILED, "E", at, NO_DURATION, 1, 0, 0, "01B", "q"),
        TaskMinuteSample("t", attempts.FAILED, "E", at, forty, 2, 81.0, 41.0, "01C", "q"),
        TaskMinuteSample(
            "t", attempts.SUCCEEDED, "", at, three, 2, pytest.approx(6.1), 3.1, "", "q"
        ),
        TaskMinuteSample("t", attempts.SUCCEEDED, "", at + MINUTE_MS, three, 1, 3.0, 3.0, "", "q"),
    ]
    assert accumulator.take() == {}


def test_a_failed_flush_keeps_the_attempts_for_the_next(
    engine_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = now_ms()
    metrics.accumulator.add(
        NAMESPACE,
        engine_db,
        metrics.MetricsBatch(attempts=[(ADD, "succeeded", "", 5.0, "", at, "default")]),
    )
    store = type(stores_for(engine_db).metrics)
    original = store.record_batch

    def broken(self, namespace, batch):  # type: ignore[no-untyped-def]
        raise DatabaseError("the database is away")

    monkeypatch.setattr(store, "record_batch", broken)
    with pytest.raises(DatabaseError):
        metrics.flush()
    monkeypatch.setattr(store, "record_batch", original)

    assert metrics.flush() == 1
    assert attempt_rows(engine_db) == {(ADD, "succeeded", ""): 1}


def test_a_worker_counts_successes_retries_failures_and_cancels_by_task(engine_db: str) -> None:
    ids = [tasks.add.enqueue(1, n).id for n in range(3)]
    ids.append(tasks.fail_always.enqueue("no").id)  # 2 retries, then failed
    ids.append(tasks.cancel_itself.enqueue().id)

    run_until_finished(ids)
    metrics.flush()

    assert attempt_rows(engine_db) == {
        (ADD, attempts.SUCCEEDED, ""): 3,
        (FAIL_ALWAYS, attempts.RETRIED, BOOM): 2,
        (FAIL_ALWAYS, attempts.FAILED, BOOM): 1,
        (tasks.cancel_itself.module_path, attempts.CANCELLED, ""): 1,
    }
    [failing] = TaskMinuteMetric.objects.using(engine_db).filter(outcome=attempts.FAILED)
    assert failing.sample_job_id == ids[3]
    timed = TaskMinuteMetric.objects.using(engine_db).filter(task_path=ADD)
    assert all(row.duration_bucket >= 0 for row in timed)


def test_each_attempt_counts_on_the_queue_its_job_ran_from(engine_db: str) -> None:
    ids = [
        tasks.add.enqueue(1, 1).id,
        tasks.add_on_emails.enqueue(1, 2).id,
        tasks.add.using(queue_name="emails").enqueue(2, 2).id,
    ]

    run_until_finished(ids, queues=["default", "emails"])
    metrics.flush()

    queues: dict[tuple[str, str], int] = {}
    for row in TaskMinuteMetric.objects.using(engine_db).filter(namespace=NAMESPACE):
        queues[(row.task_path, row.queue_name)] = (
            queues.get((row.task_path, row.queue_name), 0) + row.count
        )
    assert queues == {
        (ADD, "default"): 1,
        (ADD, "emails"): 1,
        (tasks.add_on_emails.module_path, "emails"): 1,
    }


def test_finishing_jobs_writes_no_attempt_row_the_flush_writes_one_statement(
    engine_db: str,
) -> None:
    stores, settings = stores_for(engine_db), later_settings()
    for n in range(5):
        tasks.add.enqueue(n, n)
    messages = stores.queue.claim(NAMESPACE, ["default"], "w1", 30_000, batch_size=5)
    started = start_batch(
        messages,
        stores=stores,
        namespace=NAMESPACE,
        worker_id="w1",
        lease_ms=30_000,
        settings=settings,
    )
    connection = connections[engine_db]

    with CaptureQueriesContext(connection) as finishing:
        finish_and_continue(
            [Outcome(job, return_value=1, seconds=0.002) for job in started],
            stores=stores,
            namespace=NAMESPACE,
            worker_id="w1",
            settings=settings,
        )
    with CaptureQueriesContext(connection) as flushing:
        metrics.flush()

    assert not any("later_task_minute" in query["sql"] for query in finishing.captured_queries)
    writes = [query["sql"] for query in flushing.captured_queries]
    assert sum("INSERT INTO later_task_minute" in sql for sql in writes) == 1
    [row] = TaskMinuteMetric.objects.using(engine_db).filter(task_path=ADD)
    assert (row.outcome, row.count, row.duration_bucket) == (attempts.SUCCEEDED, 5, bucket_of(2))


def test_an_attempt_past_its_deadline_is_timed_out_with_how_long_it_ran(engine_db: str) -> None:
    stores, settings = stores_for(engine_db), later_settings()
    job_id = tasks.add.enqueue(1, 1).id
    messages = stores.queue.claim(NAMESPACE, ["default"], "w1", 30_000)
    started = start_batch(
        messages,
        stores=stores,
        namespace=NAMESPACE,
        worker_id="w1",
        lease_ms=30_000,
        settings=settings,
    )
    time.sleep(0.03)

    record_lost_attempts(
        started,
        stores=stores,
        namespace=NAMESPACE,
        worker_id="w1",
        settings=settings,
        why="ran past its timeout",
        error_class=TaskTimeout,
    )
    metrics.flush()

    [row] = TaskMinuteMetric.objects.using(engine_db).filter(task_path=ADD)
    assert (row.outcome, row.error_class, row.sample_job_id) == (
        attempts.TIMED_OUT,
        class_path(TaskTimeout),
        job_id,
    )
    assert row.max_ms >= 30


def test_an_attempt_found_lost_at_a_claim_counts_with_no_duration(engine_db: str) -> None:
    stores, settings = stores_for(engine_db), later_settings()
    tasks.add.enqueue(1, 1)
    first = stores.queue.claim(NAMESPACE, ["default"], "w1", 1)
    start_batch(
        first, stores=stores, namespace=NAMESPACE, worker_id="w1", lease_ms=1, settings=settings
    )
    time.sleep(0.05)  # both of w1's leases lapse: w1 is gone
    again = stores.queue.claim(NAMESPACE, ["default"], "w2", 30_000)
    assert again, "the lapsed message is claimed again"

    start_batch(
        again,
        stores=stores,
        namespace=NAMESPACE,
        worker_id="w2",
        lease_ms=30_000,
        settings=settings,
    )
    metrics.flush()

    [row] = TaskMinuteMetric.objects.using(engine_db).filter(task_path=ADD)
    assert (row.outcome, row.error_class, row.duration_bucket) == (
        attempts.RETRIED,
        class_path(WorkerLost),
        NO_DURATION,
    )
