"""The dashboard's part of the bulk actions: ``run_now_selected``, the selection's
task prefix, ``until`` and error class, named job ids, and a run bounded by
``max_rows`` that hands back the cursor to continue from (both databases)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from later_django import api
from later_django.core.clock import now_ms
from later_django.engine.job_actions import bulk, one_job
from later_django.engine.job_actions.selection import JobSelection
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, result, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def counts(alias: str) -> dict[str, int]:
    return stores_for(alias).index.job_index_stage_counts(NAMESPACE)


def delayed_jobs(task, n: int) -> list[str]:
    later = task.using(run_after=timezone.now() + timedelta(hours=1))
    return api.enqueue_many(later, [((i, 0), {}) for i in range(n)], ids_only=True)


def target(alias: str) -> dict[str, str]:
    return {"using": alias, "namespace": NAMESPACE}


def test_run_now_selected_makes_delayed_jobs_ready_in_batches(engine_db: str) -> None:
    ids = delayed_jobs(tasks.add, 3)
    delayed_jobs(tasks.add_on_emails, 2)
    selection = JobSelection(stage="delayed", task_path="tests.engine.tasks.add")

    dry = bulk.run_now_selected(selection, **target(engine_db), dry_run=True)
    assert (dry.matched, dry.changed) == (3, 3)
    assert counts(engine_db) == {"delayed": 5}

    done = bulk.run_now_selected(selection, **target(engine_db), batch_size=2)
    assert (done.matched, done.changed, done.refused, done.batches) == (3, 3, 0, 2)
    assert counts(engine_db) == {"delayed": 2, "enqueued": 3}
    run_burst()
    assert [result(i).return_value for i in ids] == [0, 1, 2]


def test_run_now_selected_refuses_a_stage_without_a_time(engine_db: str) -> None:
    with pytest.raises(ValueError, match="jobs of stage 'failed' cannot be run now"):
        bulk.run_now_selected(JobSelection(stage="failed"), **target(engine_db))


def test_a_selection_by_task_prefix_until_and_error_class(engine_db: str) -> None:
    older = api.enqueue_many(
        tasks.fail_once_without_retry, [(("old",), {}), (("old",), {})], ids_only=True
    )
    run_burst()
    time.sleep(0.01)
    cut = now_ms()
    time.sleep(0.01)
    newer = api.enqueue_many(tasks.fail_once_without_retry, [(("new",), {})], ids_only=True)
    run_burst()
    prefix = JobSelection(stage="failed", task_prefix="tests.engine.tasks.fail_")
    until = JobSelection(stage="failed", until_ms=cut)
    error = JobSelection(stage="failed", error_class="tests.engine.tasks.Boom")
    other_error = JobSelection(stage="failed", error_class="builtins.KeyError")
    other_prefix = JobSelection(stage="failed", task_prefix="tests.engine.tasks.adds")

    def would_retry(selection: JobSelection) -> int:
        return bulk.retry_selected(selection, **target(engine_db), dry_run=True).changed

    assert would_retry(prefix) == 3
    assert would_retry(other_prefix) == 0
    assert would_retry(until) == 2
    assert would_retry(other_error) == 0
    assert would_retry(error) == 3, "fail_once_without_retry raises Boom"

    done = bulk.retry_selected(until, **target(engine_db))
    assert done.changed == 2
    assert {result(i).status.name for i in older} == {"READY"}
    assert result(newer[0]).status.name == "FAILED"


def test_named_job_ids_are_taken_in_batches_and_only_those(engine_db: str) -> None:
    ids = delayed_jobs(tasks.add, 4)
    selection = JobSelection(stage="delayed", job_ids=(ids[0], ids[2], ids[3], ids[0]))
    outcome = bulk.delete_selected(selection, **target(engine_db), batch_size=2)
    assert (outcome.matched, outcome.changed, outcome.batches) == (3, 3, 2)
    assert counts(engine_db) == {"delayed": 1}
    assert stores_for(engine_db).index.job_index_get(NAMESPACE, ids[1]) is not None


def test_a_named_job_that_left_the_stage_is_refused(engine_db: str) -> None:
    ids = delayed_jobs(tasks.add, 2)
    one_job.run_now(engine_db, NAMESPACE, ids[0])
    selection = JobSelection(stage="delayed", job_ids=tuple(ids))
    outcome = bulk.cancel_selected(selection, **target(engine_db))
    assert (outcome.matched, outcome.changed, outcome.refused) == (2, 1, 1)
    assert outcome.refusals == [f"job {ids[0]} is 'enqueued' now, no longer 'delayed'"]


def test_max_rows_stops_the_walk_and_its_cursor_continues_it(engine_db: str) -> None:
    delayed_jobs(tasks.add, 5)
    selection = JobSelection(stage="delayed")
    first = bulk.delete_selected(selection, **target(engine_db), batch_size=2, max_rows=3)
    assert first.resume_cursor is not None
    assert (first.changed, first.batches) == (3, 2), "a page of 2, then the 1 left of the bound"
    assert counts(engine_db) == {"delayed": 2}
    rest = bulk.delete_selected(
        selection, **target(engine_db), batch_size=2, cursor=first.resume_cursor, max_rows=3
    )
    assert (rest.changed, rest.resume_cursor) == (2, None)
    assert counts(engine_db) == {}


def test_a_bounded_cancel_of_queued_jobs_continues_in_the_queue(engine_db: str) -> None:
    api.enqueue_many(tasks.add, [((i, 0), {}) for i in range(5)], ids_only=True)
    selection = JobSelection(stage="enqueued")
    first = bulk.cancel_selected(selection, **target(engine_db), batch_size=2, max_rows=2)
    assert first.changed == 2
    assert first.resume_cursor is not None and first.resume_cursor.startswith("q:")
    rest = bulk.cancel_selected(
        selection, **target(engine_db), batch_size=2, cursor=first.resume_cursor
    )
    assert (rest.changed, rest.resume_cursor) == (3, None)
    assert counts(engine_db) == {"cancelled": 5}


def test_max_rows_must_be_positive(engine_db: str) -> None:
    with pytest.raises(ValueError, match="max_rows must be at least 1"):
        bulk.retry_selected(JobSelection(stage="failed"), **target(engine_db), max_rows=0)
