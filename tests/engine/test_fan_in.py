"""Fan-in (``api.after``): a child waits for every one of several parents, by ``on``.

Parents run on their own queues so that a burst worker of one queue finishes one
parent at a time while the child (on ``default``) waits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connections

from later_django.api import ParentNotFound, after, cancel, continue_with
from later_django.compat.tasks import TaskResultStatus
from later_django.core.keys import job_key, pending_parents_key
from later_django.core.records import decode_record
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import (
    NAMESPACE,
    counter_value,
    key_column,
    no_rows,
    result,
    row_counts,
    run_burst,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def stage(alias: str, job_id: str) -> str | None:
    """The job's stage by its index row (None: the queue answers for it, or gone)."""
    row = stores_for(alias).index.job_index_get(NAMESPACE, job_id)
    return None if row is None else row.stage


def pending(alias: str, child_id: str) -> int | None:
    """The stored count of parents ``child_id`` waits for (None: no counter row)."""
    return counter_value(alias, pending_parents_key(NAMESPACE, child_id))


def on_queue(queue: str, path: str, label: str):
    return tasks.record.using(queue_name=queue).enqueue(path, label)


def test_a_child_of_three_parents_runs_only_after_the_third(engine_db: str, tmp_path: Path) -> None:
    order = str(tmp_path / "order")
    a = on_queue("emails", order, "a")
    b = on_queue("reports", order, "b")
    c = tasks.record.enqueue(order, "c")
    child = after([a, b.id, c], tasks.record, order, "child")

    assert child.status == TaskResultStatus.READY
    assert stage(engine_db, child.id) == "waiting"
    assert pending(engine_db, child.id) == 3
    assert result(child.id).status == TaskResultStatus.READY

    run_burst(["emails"])
    assert stage(engine_db, child.id) == "waiting"
    assert pending(engine_db, child.id) == 2
    run_burst(["reports"])
    assert stage(engine_db, child.id) == "waiting"
    assert pending(engine_db, child.id) == 1
    assert tasks.read_lines(order) == ["a", "b"]

    run_burst(["default"])
    assert tasks.read_lines(order) == ["a", "b", "c", "child"]
    assert result(child.id).status == TaskResultStatus.SUCCESSFUL
    assert pending(engine_db, child.id) is None
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"success": 4}


def test_a_failed_parent_fails_an_on_success_child_at_once_and_its_children(
    engine_db: str, tmp_path: Path
) -> None:
    order = str(tmp_path / "order")
    ok = on_queue("emails", order, "ok")
    failing = tasks.fail_once_without_retry.using(queue_name="reports").enqueue("boom")
    child = after([ok, failing], tasks.add, 1, 2)
    chained = continue_with(child, tasks.add, 3, 4)
    other = tasks.record.enqueue(order, "other")
    fanned = after([child, other], tasks.add, 5, 6)
    either = after([child, other], tasks.record, order, "either", on="finish")

    run_burst(["reports"])  # the failing parent; `ok` has not run yet

    found = result(child.id)
    assert found.status == TaskResultStatus.FAILED
    assert found.attempts == 0
    assert [error.exception_class_path for error in found.errors] == [
        "later_django.exceptions.ParentFailed"
    ]
    assert f"parent {failing.id} failed" in found.errors[0].traceback
    assert pending(engine_db, child.id) is None
    assert f"parent {child.id} failed" in result(chained.id).errors[0].traceback
    assert result(fanned.id).status == TaskResultStatus.FAILED
    assert f"parent {child.id} failed" in result(fanned.id).errors[0].traceback
    # An on="finish" grandchild counts the failed child as finished, and waits for `other`.
    assert stage(engine_db, either.id) == "waiting"
    assert pending(engine_db, either.id) == 1

    run_burst(["emails", "default"])
    assert result(ok.id).status == TaskResultStatus.SUCCESSFUL
    assert result(child.id).status == TaskResultStatus.FAILED  # moved once, not again
    assert result(either.id).status == TaskResultStatus.SUCCESSFUL
    assert sorted(tasks.read_lines(order)) == ["either", "ok", "other"]
    assert pending(engine_db, either.id) is None


def test_an_on_finish_child_runs_after_failed_and_cancelled_parents(engine_db: str) -> None:
    failing = tasks.fail_once_without_retry.using(queue_name="reports").enqueue("boom")
    cancelled = tasks.add.using(queue_name="emails").enqueue(1, 1)
    ok = tasks.add.enqueue(2, 2)
    child = after([failing, cancelled, ok], tasks.add, 3, 4, on="finish")

    assert cancel(cancelled.id) == "cancelled"
    run_burst(["reports"])
    assert stage(engine_db, child.id) == "waiting"
    assert pending(engine_db, child.id) == 1
    run_burst(["default"])

    assert result(child.id).status == TaskResultStatus.SUCCESSFUL
    assert result(child.id).return_value == 7


def test_a_cancelled_parent_fails_an_on_success_child_naming_it(engine_db: str) -> None:
    first = tasks.add.using(queue_name="emails").enqueue(1, 1)
    second = tasks.add.enqueue(2, 2)
    child = after([first, second], tasks.add, 3, 4)

    assert cancel(second.id) == "cancelled"

    assert result(child.id).status == TaskResultStatus.FAILED
    assert f"parent {second.id} cancelled" in result(child.id).errors[0].traceback
    run_burst(["emails"])
    assert result(child.id).status == TaskResultStatus.FAILED
    assert pending(engine_db, child.id) is None


def test_parents_already_finished_count_at_once(engine_db: str) -> None:
    done = tasks.add.enqueue(1, 1)
    failed = tasks.fail_once_without_retry.enqueue("boom")
    run_burst()
    open_parent = tasks.add.using(queue_name="emails").enqueue(2, 2)

    ready = after([done, failed], tasks.add, 1, 2, on="finish")
    failed_child = after([open_parent, done, failed], tasks.add, 1, 2)
    waiting = after([done, open_parent], tasks.add, 5, 5)

    assert stage(engine_db, ready.id) is None  # ready: the queue answers for it
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 2  # `ready` and `open_parent`
    assert failed_child.status == TaskResultStatus.FAILED
    assert f"parent {failed.id} failed" in result(failed_child.id).errors[0].traceback
    assert pending(engine_db, failed_child.id) is None
    assert stage(engine_db, waiting.id) == "waiting"
    assert pending(engine_db, waiting.id) == 1

    run_burst(["default"])
    assert result(ready.id).return_value == 3
    assert stage(engine_db, waiting.id) == "waiting"
    run_burst(["emails", "default"])
    assert result(waiting.id).return_value == 10


def test_duplicate_parents_count_once(engine_db: str) -> None:
    a = tasks.add.using(queue_name="emails").enqueue(1, 1)
    b = tasks.add.enqueue(2, 2)
    child = after([a, b.id, a.id, b], tasks.add, 1, 2)
    only_a = after([a, a.id], tasks.add, 3, 4)

    assert pending(engine_db, child.id) == 2
    # One distinct parent: a continuation, as continue_with writes it.
    assert pending(engine_db, only_a.id) is None
    assert stores_for(engine_db).index.job_index_get(NAMESPACE, only_a.id).parent_job_id == a.id

    run_burst(["default"])
    assert stage(engine_db, child.id) == "waiting"
    run_burst(["emails", "default"])
    assert result(child.id).return_value == 3
    assert result(only_a.id).return_value == 7


def test_an_unknown_parent_raises_naming_it_and_writes_nothing(engine_db: str) -> None:
    known = tasks.add.enqueue(1, 1)
    before = row_counts(engine_db)
    with pytest.raises(ParentNotFound, match="parent job '01NOSUCHJOB' does not exist"):
        after([known, "01NOSUCHJOB"], tasks.add, 1, 2)
    assert row_counts(engine_db) == before


def test_no_parent_or_an_unknown_on_is_refused(engine_db: str) -> None:
    with pytest.raises(ValueError, match="at least one parent"):
        after([], tasks.add, 1, 2)
    a, b = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    with pytest.raises(ValueError, match="on must be one of"):
        after([a, b], tasks.add, 1, 2, on="failure")
    with pytest.raises(TypeError, match="takes a list of parent jobs"):
        after(a.id, tasks.add, 1, 2)
    assert row_counts(engine_db)["later_storage"] == 2


def test_a_cancelled_child_stays_cancelled_and_its_counter_goes(engine_db: str) -> None:
    a, b = tasks.add.using(queue_name="emails").enqueue(1, 1), tasks.add.enqueue(2, 2)
    child = after([a, b], tasks.add, 1, 2)

    assert cancel(child.id) == "cancelled"
    run_burst(["emails", "default"])

    assert result(child.id).status == TaskResultStatus.FAILED
    assert result(child.id).errors[0].exception_class_path == "later_django.exceptions.JobCancelled"
    assert pending(engine_db, child.id) is None
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 0


def test_nothing_is_left_once_a_fan_in_has_run(engine_db: str) -> None:
    parents = [tasks.add.enqueue(n, n) for n in range(5)]
    child = after(parents, tasks.add, 0, 0)
    run_burst()
    assert result(child.id).status == TaskResultStatus.SUCCESSFUL
    with connections[engine_db].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_storage_range")
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            f"SELECT COUNT(*) FROM later_storage WHERE {key_column(engine_db)} LIKE %s",
            ["%-pending"],
        )
        assert cursor.fetchone()[0] == 0
    assert no_rows(("later_delivery_queue",)) == row_counts(engine_db, ("later_delivery_queue",))


def test_a_diamond_fails_the_fan_in_child_once(engine_db: str) -> None:
    """A fails; B (A's continuation) fails with it; C waits for A and B. The one
    transaction that finishes A moves C once: its record names A, and the failed
    transitions it counts are A's, B's and C's, not C's twice."""
    from later_django.core.clock import minute_bucket, now_ms
    from later_django.engine import metrics

    a = tasks.fail_once_without_retry.enqueue("boom")
    b = continue_with(a, tasks.add, 1, 1)
    c = after([a, b], tasks.add, 2, 2)
    run_burst(["default"])
    metrics.flush()

    now = minute_bucket(now_ms())
    counted = stores_for(engine_db).dashboard.transitions_between(NAMESPACE, now - 5, now + 1)
    assert counted["failed"] == 3
    record = stores_for(engine_db).kv.get(job_key(NAMESPACE, c.id))
    assert decode_record(record).reason == f"parent {a.id} failed"
    assert stage(engine_db, c.id) == "failed"
