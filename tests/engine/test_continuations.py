"""Continuations: a child waits for its parent and runs after it, by ``on``."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from django.db import connections, transaction

from later_django.api import ParentNotFound, continue_with
from later_django.compat.tasks import TaskResultStatus
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import (
    NAMESPACE,
    no_rows,
    result,
    row_counts,
    run_burst,
    run_until_finished,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_a_chain_of_three_jobs_runs_in_order(engine_db: str, tmp_path: Path) -> None:
    order = str(tmp_path / "order")
    first = tasks.record.enqueue(order, "A")
    second = continue_with(first, tasks.record, order, "B")
    third = continue_with(second.id, tasks.record, order, "C")
    storage = stores_for(engine_db)
    assert storage.index.job_index_get(NAMESPACE, second.id).stage == "waiting"
    assert storage.index.job_index_get(NAMESPACE, third.id).stage == "waiting"
    assert second.status == third.status == TaskResultStatus.READY

    results = run_until_finished([first.id, second.id, third.id])

    assert [found.status for found in results] == [TaskResultStatus.SUCCESSFUL] * 3
    assert tasks.read_lines(order) == ["A", "B", "C"]
    assert results[0].finished_at <= results[1].started_at
    assert results[1].finished_at <= results[2].started_at


def test_ten_children_of_one_parent_all_run_after_it(engine_db: str, tmp_path: Path) -> None:
    order = str(tmp_path / "order")
    parent = tasks.record.enqueue(order, "parent")
    children = [continue_with(parent.id, tasks.record, order, f"child {n}") for n in range(10)]
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {
        "enqueued": 1,
        "waiting": 10,
    }

    results = run_until_finished([parent.id, *(child.id for child in children)])

    assert all(found.status == TaskResultStatus.SUCCESSFUL for found in results)
    assert [found.return_value for found in results[1:]] == [f"child {n}" for n in range(10)]
    lines = tasks.read_lines(order)
    assert lines[0] == "parent"
    assert sorted(lines[1:]) == sorted(f"child {n}" for n in range(10))
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"success": 11}


def test_a_child_on_success_of_a_failed_parent_fails_naming_the_parent(engine_db: str) -> None:
    parent = tasks.fail_once_without_retry.enqueue("parent fails")
    child = continue_with(parent.id, tasks.add, 1, 2, on="success")

    parent_result, child_result = run_until_finished([parent.id, child.id])

    assert parent_result.status == TaskResultStatus.FAILED
    assert child_result.status == TaskResultStatus.FAILED
    assert child_result.attempts == 0
    assert child_result.started_at is None
    assert [error.exception_class_path for error in child_result.errors] == [
        "later_django.exceptions.ParentFailed"
    ]
    assert f"parent {parent.id} failed" in child_result.errors[0].traceback


def test_a_failure_propagates_down_a_chain_of_on_success_children(engine_db: str) -> None:
    parent = tasks.fail_once_without_retry.enqueue("parent fails")
    child = continue_with(parent.id, tasks.add, 1, 2)
    grandchild = continue_with(child.id, tasks.add, 3, 4)

    results = run_until_finished([parent.id, child.id, grandchild.id])

    assert [found.status for found in results] == [TaskResultStatus.FAILED] * 3
    assert f"parent {child.id} failed" in results[2].errors[0].traceback
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"failed": 3}


def test_a_child_on_finish_of_a_failed_parent_runs(engine_db: str) -> None:
    parent = tasks.fail_once_without_retry.enqueue("parent fails")
    child = continue_with(parent.id, tasks.add, 1, 2, on="finish")

    parent_result, child_result = run_until_finished([parent.id, child.id])

    assert parent_result.status == TaskResultStatus.FAILED
    assert child_result.status == TaskResultStatus.SUCCESSFUL
    assert child_result.return_value == 3
    assert child_result.errors == []


def test_a_child_added_after_its_parent_succeeded_is_enqueued_at_once(engine_db: str) -> None:
    parent = tasks.add.enqueue(1, 1)
    run_burst()
    assert result(parent.id).status == TaskResultStatus.SUCCESSFUL

    child = continue_with(parent.id, tasks.add, 2, 2)

    storage = stores_for(engine_db)
    assert child.status == TaskResultStatus.READY
    assert storage.index.job_index_get(NAMESPACE, child.id) is None  # the queue answers for it
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 1
    assert storage.index.job_index_stage_counts(NAMESPACE) == {"success": 1, "enqueued": 1}
    run_burst()
    assert result(child.id).return_value == 4


def test_a_child_on_success_added_after_its_parent_failed_fails_at_once(engine_db: str) -> None:
    parent = tasks.fail_once_without_retry.enqueue("parent fails")
    run_burst()
    assert result(parent.id).status == TaskResultStatus.FAILED

    child = continue_with(parent.id, tasks.add, 2, 2)

    assert child.status == TaskResultStatus.FAILED
    assert f"parent {parent.id} failed" in result(child.id).errors[0].traceback
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 0


def test_continue_with_an_unknown_parent_raises_and_writes_nothing(engine_db: str) -> None:
    with pytest.raises(ParentNotFound, match="parent job '01NOSUCHJOB' does not exist"):
        continue_with("01NOSUCHJOB", tasks.add, 1, 2)
    assert row_counts(engine_db) == no_rows()


def test_a_caught_parent_not_found_leaves_the_callers_transaction_and_data_intact(
    engine_db: str,
) -> None:
    with transaction.atomic(using=engine_db):
        before = tasks.add.enqueue(1, 2)
        with pytest.raises(ParentNotFound):
            continue_with("01NOSUCHJOB", tasks.add, 1, 2)
        after = tasks.add.enqueue(3, 4)

    assert result(before.id).status == TaskResultStatus.READY
    assert result(after.id).status == TaskResultStatus.READY
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 2


def test_continue_with_refuses_an_unknown_on(engine_db: str) -> None:
    parent = tasks.add.enqueue(1, 1)
    with pytest.raises(ValueError, match="on must be one of"):
        continue_with(parent.id, tasks.add, 1, 2, on="failure")
    assert row_counts(engine_db)["later_storage"] == 1


def test_children_added_while_the_parent_finishes_all_run(engine_db: str, tmp_path: Path) -> None:
    """Children keep coming before, while and after the parent finishes: none is
    left waiting for a parent that has already released its children."""
    release = tmp_path / "release"
    parent = tasks.wait_for_file.enqueue(str(release), 20.0)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            run_burst()
        except BaseException as error:
            failures.append(error)
        finally:
            connections.close_all()

    worker = threading.Thread(target=work)
    worker.start()
    children = []
    try:
        deadline = time.monotonic() + 10
        while result(parent.id).status != TaskResultStatus.RUNNING:
            assert time.monotonic() < deadline, "the worker did not start the parent"
            time.sleep(0.01)
        children += [continue_with(parent.id, tasks.add, n, 0) for n in range(5)]
        release.touch()
        while not result(parent.id).is_finished and len(children) < 2_000:
            children.append(continue_with(parent.id, tasks.add, len(children), 0))
        children += [continue_with(parent.id, tasks.add, len(children) + n, 0) for n in range(5)]
    finally:
        release.touch()
        worker.join(timeout=30)

    assert not failures
    assert result(parent.id).status == TaskResultStatus.SUCCESSFUL
    results = run_until_finished([child.id for child in children])
    assert [found.return_value for found in results] == list(range(len(children)))
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {
        "success": len(children) + 1
    }
