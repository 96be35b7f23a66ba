"""Results passed to children: ``context.parent_results``, the size limit on a return
value (``LATER["RESULT_MAX_BYTES"]``), parents kept from the sweep until their
children finish, and a clear failure when a parent's record is gone anyway."""

from __future__ import annotations

import time

import pytest
from django.db import connections
from django.test import override_settings

from later_django.api import after, cancel, continue_with
from later_django.compat.tasks import TaskResultDoesNotExist, TaskResultStatus
from later_django.conf import later_settings
from later_django.core.clock import now_ms
from later_django.core.keys import dependents_key, job_key
from later_django.engine.job_actions.one_job import delete_job, retry_failed
from later_django.maintenance import PassContext, sweep
from tests.engine import result_tasks, tasks
from tests.engine.support import (
    NAMESPACE,
    counter_value,
    key_column,
    result,
    run_burst,
    run_until_finished,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def dependents(alias: str, parent_id: str) -> int | None:
    """The stored count of ``parent_id``'s unfinished children (None: no counter row)."""
    return counter_value(alias, dependents_key(NAMESPACE, parent_id))


def expire_now(alias: str, job_id: str) -> None:
    """The finished job's retention runs out: its record and index row expired."""
    past = now_ms() - 1
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"UPDATE later_storage SET date_expire_unindexed = %s WHERE {key_column(alias)} = %s",
            [past, job_key(NAMESPACE, job_id)],
        )
        assert cursor.rowcount == 1
        cursor.execute(
            "UPDATE later_jobs_index SET date_expire = %s WHERE namespace = %s AND job_id = %s",
            [past, NAMESPACE, job_id],
        )
        assert cursor.rowcount == 1


def record_exists(alias: str, job_id: str) -> bool:
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM later_storage WHERE {key_column(alias)} = %s",
            [job_key(NAMESPACE, job_id)],
        )
        return cursor.fetchone()[0] == 1


def run_sweep(alias: str) -> int:
    """The real sweep pass, once."""
    context = PassContext(
        using=alias,
        namespace=NAMESPACE,
        settings=later_settings(),
        owner="test-process",
        deadline=time.monotonic() + 30.0,
    )
    return sweep.sweep(context)


def test_a_continuation_reads_its_one_parents_result(engine_db: str) -> None:
    parent = result_tasks.number.enqueue(41)
    child = continue_with(parent, result_tasks.parent_results)

    [done] = run_until_finished([child.id])

    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == [[parent.id, 41]]


def test_a_fan_in_child_reads_its_three_parents_results_in_the_order_given(
    engine_db: str,
) -> None:
    parents = [result_tasks.number.enqueue(value) for value in (3, 1, 2)]
    given = [parents[2], parents[0], parents[1]]
    child = after(given, result_tasks.parent_results)

    [done] = run_until_finished([child.id])

    assert done.return_value == [[parents[2].id, 2], [parents[0].id, 3], [parents[1].id, 1]]
    for parent in parents:
        assert dependents(engine_db, parent.id) is None


def test_an_on_finish_child_of_a_failed_parent_reads_none_for_it(engine_db: str) -> None:
    ok = result_tasks.number.enqueue(5)
    failing = tasks.fail_once_without_retry.enqueue("no")
    child = after([ok, failing], result_tasks.parent_results, on="finish")

    [done] = run_until_finished([child.id])

    assert done.return_value == [[ok.id, 5], [failing.id, None]]


def test_a_chain_adds_to_each_parents_result(engine_db: str) -> None:
    a = result_tasks.add_to_parent.enqueue(1)
    b = continue_with(a, result_tasks.add_to_parent, 10)
    c = continue_with(b, result_tasks.add_to_parent, 100)

    done = run_until_finished([a.id, b.id, c.id])

    assert [found.return_value for found in done] == [1, 11, 111]


def test_a_job_without_parents_has_empty_parent_results(engine_db: str) -> None:
    alone = result_tasks.parent_results.enqueue()

    [done] = run_until_finished([alone.id])

    assert done.return_value == []


def test_a_return_value_over_the_limit_fails_the_job_at_its_finish_without_retry(
    db_alias: str,
) -> None:
    later = {"NAMESPACE": NAMESPACE, "DATABASE": db_alias, "RESULT_MAX_BYTES": 1_000}
    with override_settings(LATER=later):
        small = result_tasks.returns_bytes.enqueue(990)  # 993 bytes encoded
        large = result_tasks.returns_bytes.enqueue(1_000)  # 1,003 bytes encoded
        child = continue_with(large, result_tasks.parent_results)

        run_until_finished([small.id, large.id, child.id])

        assert result(small.id).status == TaskResultStatus.SUCCESSFUL
        failed = result(large.id)
        assert failed.status == TaskResultStatus.FAILED
        assert len(failed.errors) == 1, "failed at once, not retried"
        error = failed.errors[0]
        assert error.exception_class_path == "later_django.exceptions.ResultTooLarge"
        assert (
            "the return value is 1,003 bytes encoded, over the limit of 1,000 bytes "
            "(LATER['RESULT_MAX_BYTES'])" in error.traceback
        )
        # Its child runs only on success: it fails naming the parent.
        assert f"parent {large.id} failed" in result(child.id).errors[0].traceback


def test_a_parent_past_its_retention_is_kept_until_its_child_has_run(engine_db: str) -> None:
    parent = result_tasks.number.enqueue(7)
    other = tasks.add.using(queue_name="emails").enqueue(1, 1)
    child = after([parent, other], result_tasks.add_to_parent, 1)
    assert dependents(engine_db, parent.id) == 1
    run_burst(["default"])  # the parent runs; the child waits for `other`
    assert result(parent.id).status == TaskResultStatus.SUCCESSFUL
    expire_now(engine_db, parent.id)

    run_sweep(engine_db)

    assert record_exists(engine_db, parent.id), "the sweep kept the parent its child needs"
    with pytest.raises(TaskResultDoesNotExist):
        result(parent.id)  # past its retention, it reads as gone to everyone else
    run_burst(["emails"])
    run_burst(["default"])
    assert result(child.id).return_value == 7 + 2 + 1
    assert dependents(engine_db, parent.id) is None

    run_sweep(engine_db)

    assert not record_exists(engine_db, parent.id), "swept once its child has run"


def test_a_finished_parent_gains_a_hold_from_a_late_continuation(engine_db: str) -> None:
    parent = result_tasks.number.enqueue(2)
    run_burst(["default"])
    child = continue_with(parent, result_tasks.add_to_parent, 3)
    assert dependents(engine_db, parent.id) == 1
    expire_now(engine_db, parent.id)

    run_sweep(engine_db)
    run_burst(["default"])

    assert result(child.id).return_value == 5
    run_sweep(engine_db)
    assert not record_exists(engine_db, parent.id)


def test_a_deleted_parent_fails_a_child_that_reads_its_result_naming_it(
    engine_db: str,
) -> None:
    parent = result_tasks.number.enqueue(1)
    gone = result_tasks.number.enqueue(2)
    other = tasks.add.using(queue_name="emails").enqueue(1, 1)
    reader = after([parent, gone, other], result_tasks.parent_results)
    ignorer = after([parent, gone, other], result_tasks.ignores_parents, 9)
    run_burst(["default"])
    delete_job(engine_db, NAMESPACE, gone.id)
    run_burst(["emails"])

    run_until_finished([reader.id, ignorer.id])

    failed = result(reader.id)
    assert failed.status == TaskResultStatus.FAILED
    assert len(failed.errors) == 1, "failed at once, not retried"
    assert failed.errors[0].exception_class_path == "later_django.exceptions.ParentResultMissing"
    assert (
        f"parent {gone.id}'s record is gone: its result cannot be passed"
        in failed.errors[0].traceback
    )
    # A child that never reads its parents' results does not need them.
    assert result(ignorer.id).return_value == 9
    for job in (parent, gone, other):
        assert dependents(engine_db, job.id) is None


def test_deleting_a_waiting_child_lets_its_parents_go(engine_db: str) -> None:
    parent = result_tasks.number.enqueue(1)
    other = tasks.add.using(queue_name="emails").enqueue(1, 1)
    child = after([parent, other], result_tasks.parent_results)
    run_burst(["default"])
    assert dependents(engine_db, parent.id) == 1

    delete_job(engine_db, NAMESPACE, child.id)

    assert dependents(engine_db, parent.id) is None
    assert dependents(engine_db, other.id) is None


def test_cancelling_a_waiting_child_lets_its_parents_go(engine_db: str) -> None:
    parent = result_tasks.number.enqueue(1)
    other = tasks.add.using(queue_name="emails").enqueue(1, 1)
    child = continue_with(other, result_tasks.parent_results)
    fan_in = after([parent, other], result_tasks.parent_results)
    run_burst(["default"])
    assert dependents(engine_db, parent.id) == 1
    assert dependents(engine_db, other.id) == 2

    assert cancel(fan_in.id) == "cancelled"

    assert dependents(engine_db, parent.id) is None
    assert dependents(engine_db, other.id) == 1, "the continuation still waits for it"
    run_burst(["emails"])
    run_burst(["default"])
    assert result(child.id).return_value == [[other.id, 2]]
    assert dependents(engine_db, other.id) is None


def test_retrying_a_failed_child_holds_its_parents_again(engine_db: str) -> None:
    later = {"NAMESPACE": NAMESPACE, "DATABASE": engine_db, "RESULT_MAX_BYTES": 10}
    parent = result_tasks.number.enqueue(1)
    child = continue_with(parent, result_tasks.parent_results)
    with override_settings(LATER=later):
        run_until_finished([parent.id, child.id])  # the child's result is too large
    assert result(child.id).status == TaskResultStatus.FAILED
    assert dependents(engine_db, parent.id) is None

    retry_failed(engine_db, NAMESPACE, child.id)

    assert dependents(engine_db, parent.id) == 1
    run_until_finished([child.id])
    assert result(child.id).return_value == [[parent.id, 1]]
    assert dependents(engine_db, parent.id) is None


def test_a_diamond_failed_in_one_finish_lets_go_of_each_parent_once(engine_db: str) -> None:
    """A fails; in its finish B (its child) fails, and C (a child of A and B) fails
    (by A, then again by B in the same transaction): A is still held for D."""
    a = tasks.fail_once_without_retry.enqueue("no")
    b = continue_with(a, result_tasks.number, 1)
    c = after([a, b], result_tasks.number, 2)
    reader = result_tasks.parent_results.using(queue_name="emails")
    d = continue_with(a, reader, on="finish")
    assert dependents(engine_db, a.id) == 3

    finished = run_until_finished([a.id])

    assert finished[0].status == TaskResultStatus.FAILED
    assert result(b.id).status == TaskResultStatus.FAILED
    assert result(c.id).status == TaskResultStatus.FAILED
    assert dependents(engine_db, b.id) is None
    assert dependents(engine_db, a.id) == 1, "still held for D, which has not run"
    run_burst(["emails"])
    assert result(d.id).return_value == [[a.id, None]]
    assert dependents(engine_db, a.id) is None
