"""``enqueue_many`` writes a batch with a fixed number of statements, whatever its size."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResult, TaskResultStatus, task_enqueued
from later_django.engine import metrics
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, result, row_counts, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

WRITTEN_TABLES = ("later_storage", "later_jobs_index", "later_delivery_queue")


def statements_writing(captured: CaptureQueriesContext, table: str) -> int:
    """How many captured statements insert into (or upsert) ``table``."""
    pattern = re.compile(rf'INSERT\s+INTO\s+"?{table}"?[\s(]', re.IGNORECASE)
    return sum(1 for query in captured.captured_queries if pattern.search(query["sql"]))


def enqueue_and_capture(alias: str, count: int, offset: int) -> CaptureQueriesContext:
    calls = [((offset + n, n), {}) for n in range(count)]
    # Resets the flush clock: the once-a-second metrics flush that may follow a
    # commit is not part of the enqueue's statements.
    metrics.accumulator.take()
    with CaptureQueriesContext(connections[alias]) as captured:
        enqueued = enqueue_many(tasks.add, calls)
    assert len(enqueued) == count
    return captured


def test_enqueue_many_uses_the_same_statements_for_10_jobs_as_for_500(engine_db: str) -> None:
    small = enqueue_and_capture(engine_db, 10, 0)
    large = enqueue_and_capture(engine_db, 500, 1000)

    assert len(large) == len(small), (
        [query["sql"][:80] for query in small.captured_queries],
        [query["sql"][:80] for query in large.captured_queries],
    )
    assert statements_writing(large, "later_storage") == 1
    assert statements_writing(large, "later_delivery_queue") == 1
    # Ready jobs have no index row (the delivery queue answers for them).
    assert statements_writing(large, "later_jobs_index") == 0
    assert row_counts(engine_db) == {
        "later_storage": 510,
        "later_jobs_index": 0,
        "later_delivery_queue": 510,
    }


def test_enqueue_many_of_delayed_jobs_writes_each_table_once(engine_db: str) -> None:
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1))
    metrics.accumulator.take()
    with CaptureQueriesContext(connections[engine_db]) as captured:
        enqueue_many(later, [((n, n), {}) for n in range(500)])

    # Records and schedule entries share one upsert; index rows take one.
    assert statements_writing(captured, "later_storage") == 1
    assert statements_writing(captured, "later_jobs_index") == 1
    assert statements_writing(captured, "later_delivery_queue") == 0
    assert row_counts(engine_db) == {
        "later_storage": 1000,
        "later_jobs_index": 500,
        "later_delivery_queue": 0,
    }
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"delayed": 500}


def test_five_hundred_jobs_enqueued_together_all_run(engine_db: str) -> None:
    enqueued = enqueue_many(tasks.add, [((n, 1), {}) for n in range(500)])
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 500

    run_burst(concurrency=8)

    results = [result(job.id) for job in enqueued]
    assert all(found.status == TaskResultStatus.SUCCESSFUL for found in results)
    assert [found.return_value for found in results] == [n + 1 for n in range(500)]
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 0
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"success": 500}


def test_one_enqueue_is_one_statement_on_postgresql_and_two_on_sqlite(engine_db: str) -> None:
    metrics.accumulator.take()
    with CaptureQueriesContext(connections[engine_db]) as captured:
        tasks.add.enqueue(1, 2)

    statements = [query["sql"] for query in captured.captured_queries]
    if connections[engine_db].vendor == "postgresql":
        # Record and message in one WITH statement, each as a one-row VALUES (no
        # arrays to bind, no unnest to plan), with the wake-up of listening workers.
        assert len(statements) == 1, statements
        assert "unnest" not in statements[0]
        assert statements[0].count("VALUES") == 2
        assert "pg_notify" in statements[0]
    else:
        writes = [sql for sql in statements if sql.lstrip().upper().startswith("INSERT")]
        assert len(writes) == 2, statements
    assert statements_writing(captured, "later_storage") == 1
    assert statements_writing(captured, "later_delivery_queue") == 1
    assert row_counts(engine_db) == {
        "later_storage": 1,
        "later_jobs_index": 0,
        "later_delivery_queue": 1,
    }


def test_enqueue_many_with_ids_only_returns_ids_and_sends_no_signal(engine_db: str) -> None:
    announced: list[str] = []

    def receiver(sender: object, task_result: TaskResult, **kwargs: object) -> None:
        announced.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        ids = enqueue_many(tasks.add, [((n, 1), {}) for n in range(50)], ids_only=True)
        with_results = enqueue_many(tasks.add, [((100, 1), {})])
    finally:
        task_enqueued.disconnect(receiver)

    assert len(ids) == 50 and all(isinstance(job_id, str) for job_id in ids)
    assert ids == sorted(ids)  # ULIDs, in enqueue order
    # Only the call that built TaskResult values announced them.
    assert announced == [with_results[0].id]
    assert [result(job_id).args for job_id in ids] == [[n, 1] for n in range(50)]

    run_burst(concurrency=8)
    assert [result(job_id).return_value for job_id in ids] == [n + 1 for n in range(50)]


def test_enqueue_many_with_ids_only_checks_every_call_first(engine_db: str) -> None:
    calls: list[tuple[tuple[object, ...], dict[str, object]]] = [((1, 1), {}), ((object(), 1), {})]
    with pytest.raises(TypeError, match=r"enqueue_many call 1: Unsupported type: args\[0\]"):
        enqueue_many(tasks.add, calls, ids_only=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="enqueue_many call 0 must be an"):
        enqueue_many(tasks.add, [(1, 2, 3)], ids_only=True)  # type: ignore[list-item]
    assert row_counts(engine_db) == {
        "later_storage": 0,
        "later_jobs_index": 0,
        "later_delivery_queue": 0,
    }
