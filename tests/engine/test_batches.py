"""Batches (``later_django.batches``): the jobs enqueued inside ``with batch(...)``, and
callbacks fired once when all of them have finished, by rule, on both databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import transaction

from later_django.api import enqueue_many
from later_django.batches import batch, callback
from later_django.compat.tasks import TaskResultStatus
from later_django.core.keys import dependents_key
from later_django.engine.record_reads import read_records
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import (
    NAMESPACE,
    counter_value,
    no_rows,
    result,
    row_counts,
    run_until_finished,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def fired(path: Path) -> dict[str, dict]:
    """The callbacks that ran, by label, with the counts they were given."""
    lines = [json.loads(line) for line in tasks.read_lines(path)]
    by_label = {line.pop("label"): line for line in lines}
    assert len(by_label) == len(lines), f"a callback ran twice: {lines}"
    return by_label


def every_rule(path: Path) -> dict[str, object]:
    return {
        rule: callback(tasks.record_outcome, str(path), rule)
        for rule in ("on_success", "on_failure", "on_finish")
    }


def test_a_batch_that_succeeds_fires_on_success_and_on_finish_once(
    engine_db: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    with batch(**every_rule(calls)) as opened:
        jobs = [tasks.add.enqueue(n, n) for n in range(5)]
        enqueue_many(tasks.add, [((n, 1), {}) for n in range(15)])
    assert len(opened.members) == 20
    assert opened.members[:5] == [job.id for job in jobs]

    run_until_finished([*opened.members, *(job.id for job in opened.callbacks.values())])
    counts = {"members": 20, "succeeded": 20, "failed": 0, "cancelled": 0, "failed_ids": []}
    assert fired(calls) == {"on_success": counts, "on_finish": counts}
    # The on_failure job ran and did not call its callback.
    assert result(opened.callbacks["on_failure"].id).status == TaskResultStatus.SUCCESSFUL


def test_a_failed_member_fires_on_failure_with_its_id_and_not_on_success(
    engine_db: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    with batch(**every_rule(calls)) as opened:
        tasks.add.enqueue(1, 1)
        failing = tasks.fail_once_without_retry.enqueue("boom")
        tasks.add.enqueue(2, 2)

    run_until_finished([*opened.members, *(job.id for job in opened.callbacks.values())])
    counts = {"members": 3, "succeeded": 2, "failed": 1, "cancelled": 0}
    assert fired(calls) == {
        "on_failure": {**counts, "failed_ids": [failing.id]},
        "on_finish": {**counts, "failed_ids": [failing.id]},
    }


def test_the_callbacks_wait_for_the_last_member(engine_db: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    with batch(on_finish=callback(tasks.record_outcome, str(calls), "done")) as opened:
        tasks.add.enqueue(1, 1)
        late = tasks.add.using(queue_name="reports").enqueue(2, 2)
    run_until_finished([opened.members[0]])
    assert fired(calls) == {}
    assert result(opened.callbacks["on_finish"].id).status == TaskResultStatus.READY
    run_until_finished([late.id, opened.callbacks["on_finish"].id], queues=("reports", "default"))
    assert fired(calls)["done"]["succeeded"] == 2


def test_an_empty_batch_fires_on_success_and_on_finish_at_once(
    engine_db: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    with batch(**every_rule(calls)) as opened:
        pass
    run_until_finished([job.id for job in opened.callbacks.values()])
    nothing = {"members": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "failed_ids": []}
    assert fired(calls) == {"on_success": nothing, "on_finish": nothing}


def test_a_batch_with_one_member_fires_after_it(engine_db: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    with batch(on_success=callback(tasks.record_outcome, str(calls), "one")) as opened:
        only = tasks.add.enqueue(1, 1)
    run_until_finished([only.id, opened.callbacks["on_success"].id])
    assert fired(calls)["one"]["succeeded"] == 1


def test_a_running_member_adds_members_the_callbacks_wait_for(
    engine_db: str, tmp_path: Path
) -> None:
    calls, lines = tmp_path / "calls", str(tmp_path / "lines")
    with batch(**every_rule(calls)) as opened:
        tasks.add.enqueue(1, 1)
        tasks.spawn_into_batch.enqueue(lines, 3)
    callbacks = [job.id for job in opened.callbacks.values()]
    run_until_finished([*opened.members, *callbacks])
    assert sorted(tasks.read_lines(lines)) == ["added-0", "added-1", "added-2"]
    counts = {"members": 5, "succeeded": 5, "failed": 0, "cancelled": 0, "failed_ids": []}
    assert fired(calls) == {"on_success": counts, "on_finish": counts}


def test_an_added_member_is_kept_for_the_callback_until_it_has_run(
    engine_db: str, tmp_path: Path
) -> None:
    lines = str(tmp_path / "lines")
    # The callback waits on queue "reports", which the burst worker below does not serve.
    waiting = callback(tasks.record_outcome.using(queue_name="reports"), str(tmp_path / "c"), "x")
    with batch(on_finish=waiting) as opened:
        spawner = tasks.spawn_into_batch.enqueue(lines, 2)
    run_until_finished([spawner.id])
    records = read_records(stores_for(engine_db).kv, NAMESPACE, [opened.callbacks["on_finish"].id])
    (fire,) = records.values()
    added = [job for job in fire.parent_job_ids if job != spawner.id]
    assert len(added) == 2
    for job in [spawner.id, *added]:
        assert counter_value(engine_db, dependents_key(NAMESPACE, job)) == 1
    run_until_finished([*added, opened.callbacks["on_finish"].id], queues=("default", "reports"))
    for job in [spawner.id, *added]:
        assert counter_value(engine_db, dependents_key(NAMESPACE, job)) is None


def test_added_members_may_add_more_in_turn(engine_db: str, tmp_path: Path) -> None:
    calls, lines = tmp_path / "calls", str(tmp_path / "lines")
    with batch(on_finish=callback(tasks.record_outcome, str(calls), "done")) as opened:
        tasks.spawn_into_batch.enqueue(lines, 2, 2)  # 2 children, each 1 grandchild, ...
    run_until_finished([*opened.members, opened.callbacks["on_finish"].id], timeout=30)
    # 1 member + 2 added + 2 grandchildren + 2 great-grandchildren that record.
    assert sorted(tasks.read_lines(lines)) == ["added-0", "added-0"]
    assert fired(calls)["done"]["members"] == 7


def test_a_job_outside_a_batch_cannot_add_members(engine_db: str, tmp_path: Path) -> None:
    job = tasks.spawn_into_batch.enqueue(str(tmp_path / "lines"), 1)
    (finished,) = run_until_finished([job.id])
    assert finished.status == TaskResultStatus.FAILED
    assert "is not a member of a batch whose callbacks still wait" in finished.errors[-1].traceback


def test_a_block_that_raises_leaves_no_member_and_no_callback(
    engine_db: str, tmp_path: Path
) -> None:
    with pytest.raises(RuntimeError, match="the view failed"):  # noqa: SIM117
        with batch(on_finish=callback(tasks.record_outcome, str(tmp_path / "calls"), "x")):
            tasks.add.enqueue(1, 1)
            raise RuntimeError("the view failed")
    assert row_counts(engine_db) == no_rows()


def test_a_batch_joins_the_callers_transaction(engine_db: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using=engine_db):
        with batch(on_finish=callback(tasks.record_outcome, str(tmp_path / "calls"), "x")):
            tasks.add.enqueue(1, 1)
        raise RuntimeError("rolled back after the batch closed")
    assert row_counts(engine_db) == no_rows()


def test_a_batch_needs_a_callback_and_does_not_nest(engine_db: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="a batch needs a callback"), batch():
        pass
    with (
        pytest.raises(TypeError, match="on_success must be callback"),
        batch(
            on_success=tasks.add  # type: ignore[arg-type]
        ),
    ):
        pass
    inner = callback(tasks.record_outcome, str(tmp_path / "calls"), "inner")
    with pytest.raises(RuntimeError, match="batches do not nest"):  # noqa: SIM117
        with batch(on_finish=inner):
            with batch(on_finish=inner):
                pass
    assert row_counts(engine_db) == no_rows()
