"""A workflow or a batch as one unit: its jobs carry its id, its row counts them by
stage in the transactions that move them, and ``cancel_workflow`` cancels what has
not run; on both databases."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction

from later_django.batches import batch, callback
from later_django.core.clock import now_ms
from later_django.core.keys import workflow_count_bounds, workflow_key
from later_django.engine import workflow_rest, workflows
from later_django.engine.job_actions.one_job import delete_job
from later_django.engine.record_reads import read_records
from later_django.engine.workflow_counts import increments
from later_django.exceptions import ActionRefused
from later_django.storage.stores import stores_for
from later_django.workflow import Workflow, cancel_workflow, get_workflow, retry_workflow
from tests.engine import tasks
from tests.engine.support import NAMESPACE, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

DAY_MS = 24 * 3_600_000


def diamond(lines: str, name: str = "") -> Workflow:
    flow = Workflow(name)
    flow.add("a", tasks.record, lines, "a")
    flow.add("b", tasks.record, lines, "b", after=["a"])
    flow.add("c", tasks.record, lines, "c", after=["a"])
    flow.add("d", tasks.record, lines, "d", after=["b", "c"])
    return flow


def workflow_ids(alias: str, job_ids: list[str]) -> set[str | None]:
    records = read_records(stores_for(alias).kv, NAMESPACE, job_ids)
    assert len(records) == len(job_ids)
    return {record.workflow_id for record in records.values()}


def test_a_workflows_jobs_carry_its_id_and_its_row_counts_them_by_stage(
    engine_db: str, tmp_path: Path
) -> None:
    flow = diamond(str(tmp_path / "lines"), "order 7")
    jobs = flow.enqueue()
    ids = [job.id for job in jobs.values()]
    assert workflow_ids(engine_db, ids) == {flow.id}

    state = get_workflow(flow.id)
    assert state is not None
    assert (state.row.kind, state.row.name, state.row.callbacks) == ("workflow", "order 7", {})
    assert state.counts == {"enqueued": 1, "waiting": 3}
    assert state.state == "running"

    run_until_finished(ids)
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"success": 4}
    assert (state.state, state.jobs) == ("succeeded", 4)


def test_a_failed_step_and_the_steps_failed_by_it_are_counted_failed(
    engine_db: str, tmp_path: Path
) -> None:
    lines = str(tmp_path / "lines")
    flow = Workflow()
    flow.add("charge", tasks.fail_once_without_retry, "card declined")
    flow.add("ship", tasks.record, lines, "ship", after=["charge"])
    flow.add("release", tasks.record, lines, "release", after=["charge"], on="finish")
    jobs = flow.enqueue()
    run_until_finished([job.id for job in jobs.values()])
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"failed": 2, "success": 1}
    assert state.state == "failed"


def test_a_retried_attempt_moves_the_count_through_requeued_and_back(
    engine_db: str, tmp_path: Path
) -> None:
    flow = Workflow()
    flow.add("flaky", tasks.fail_first_time, str(tmp_path / "seen"))
    jobs = flow.enqueue()
    run_until_finished([jobs["flaky"].id], timeout=30)
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"success": 1}


def test_a_batch_is_a_workflow_whose_members_and_callbacks_carry_its_id(
    engine_db: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    with batch(
        on_success=callback(tasks.record_outcome, str(calls), "ok"), name="billing"
    ) as opened:
        tasks.add.enqueue(1, 1)
        tasks.add.enqueue(2, 2)
    fire = opened.callbacks["on_success"].id
    assert workflow_ids(engine_db, [*opened.members, fire]) == {opened.id}
    state = get_workflow(opened.id)
    assert state is not None
    assert (state.row.kind, state.row.name) == ("batch", "billing")
    assert state.row.callbacks == {"on_success": fire}
    assert state.counts == {"enqueued": 2, "waiting": 1}
    run_until_finished([*opened.members, fire])
    state = get_workflow(opened.id)
    assert state is not None
    assert state.counts == {"success": 3}


def test_members_added_while_the_batch_runs_join_it(engine_db: str, tmp_path: Path) -> None:
    lines = str(tmp_path / "lines")
    with batch(on_finish=callback(tasks.record_outcome, str(tmp_path / "c"), "x")) as opened:
        tasks.spawn_into_batch.enqueue(lines, 3)
    run_until_finished([*opened.members, opened.callbacks["on_finish"].id])
    state = get_workflow(opened.id)
    assert state is not None
    assert state.counts == {"success": 5}  # the spawner, 3 added, the callback


def test_a_workflow_enqueued_inside_a_batch_joins_the_batch(engine_db: str, tmp_path: Path) -> None:
    with batch(on_finish=callback(tasks.record_outcome, str(tmp_path / "c"), "x")) as opened:
        flow = diamond(str(tmp_path / "lines"))
        jobs = flow.enqueue()
    assert flow.id == opened.id
    assert workflow_ids(engine_db, [job.id for job in jobs.values()]) == {opened.id}
    assert stores_for(engine_db).kv.get(workflow_key(NAMESPACE, opened.id)) is not None


def test_a_workflow_rolled_back_leaves_no_row(engine_db: str, tmp_path: Path) -> None:
    flow = diamond(str(tmp_path / "lines"))
    with pytest.raises(RuntimeError), transaction.atomic(using=engine_db):
        flow.enqueue()
        raise RuntimeError("rolled back")
    assert get_workflow(flow.id) is None


def test_cancel_workflow_cancels_what_has_not_run_and_leaves_what_finished(
    engine_db: str, tmp_path: Path
) -> None:
    lines = str(tmp_path / "lines")
    flow = Workflow()
    flow.add("a", tasks.record, lines, "a")
    # "b" waits on queue "reports", which the burst worker below does not serve.
    flow.add("b", tasks.record.using(queue_name="reports"), lines, "b", after=["a"])
    flow.add("c", tasks.record, lines, "c", after=["b"])
    flow.add("d", tasks.record, lines, "d", after=["b"], on="finish")
    jobs = flow.enqueue()
    run_until_finished([jobs["a"].id])

    done = cancel_workflow(flow.id)
    assert done == {jobs["d"].id: "cancelled", jobs["c"].id: "cancelled", jobs["b"].id: "cancelled"}
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"success": 1, "cancelled": 3}
    assert state.state == "cancelled"
    assert tasks.read_lines(lines) == ["a"]
    assert cancel_workflow(flow.id) == {}


def test_a_job_deleted_by_an_operator_leaves_the_counts(engine_db: str, tmp_path: Path) -> None:
    flow = diamond(str(tmp_path / "lines"))
    jobs = flow.enqueue()
    run_until_finished([job.id for job in jobs.values()])
    delete_job(engine_db, NAMESPACE, jobs["d"].id)
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"success": 3}


def test_cancel_workflow_refuses_an_unknown_id(engine_db: str) -> None:
    with pytest.raises(LookupError, match="no workflow or batch 'nosuch'"):
        cancel_workflow("nosuch")


def test_increments_sum_a_transactions_moves_and_leave_out_zero() -> None:
    moved = {("W", "running"): -2, ("W", "success"): 2, ("W", "enqueued"): 0}
    made = increments("later", moved)
    assert [(op.key.rsplit("-", 1)[0], op.by) for op in made] == [
        ("later-flown-W-running", -2),
        ("later-flown-W-success", 2),
    ]


def test_retry_workflow_reruns_the_failed_and_what_lies_below_not_what_succeeded(
    engine_db: str, tmp_path: Path
) -> None:
    lines, seen = str(tmp_path / "lines"), str(tmp_path / "seen")
    flow = Workflow()
    flow.add("charge", tasks.record, lines, "charge")
    flow.add("reserve", tasks.fail_first_time_without_retry, seen, after=["charge"])
    flow.add("other", tasks.record, lines, "other", after=["charge"])
    flow.add("ship", tasks.record, lines, "ship", after=["reserve", "other"])
    flow.add("mail", tasks.record, lines, "mail", after=["ship"])
    flow.add("audit", tasks.record, lines, "audit", after=["reserve"], on="finish")
    jobs = flow.enqueue()
    ids = [job.id for job in jobs.values()]
    run_until_finished(ids)
    assert sorted(tasks.read_lines(lines)) == ["audit", "charge", "other"]
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"success": 3, "failed": 3}

    again = retry_workflow(flow.id)
    assert sorted(again) == sorted(jobs[name].id for name in ("reserve", "ship", "mail", "audit"))
    assert again[0] == jobs["reserve"].id, "parents first, as they joined"
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"success": 2, "enqueued": 1, "waiting": 3}
    run_until_finished(ids)
    ran = tasks.read_lines(lines)
    assert sorted(ran) == ["audit", "audit", "charge", "mail", "other", "ship"]
    assert ran.index("ship") < ran.index("mail")
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"success": 6}
    assert retry_workflow(flow.id) == []


def test_retry_workflow_refuses_a_workflow_still_running(engine_db: str, tmp_path: Path) -> None:
    flow = diamond(str(tmp_path / "lines"))
    flow.enqueue()
    with pytest.raises(ActionRefused, match="not finished"):
        retry_workflow(flow.id)
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"enqueued": 1, "waiting": 3}


def test_a_cancelled_workflow_runs_again_after_retry(engine_db: str, tmp_path: Path) -> None:
    lines = str(tmp_path / "lines")
    flow = diamond(lines)
    jobs = flow.enqueue()
    cancel_workflow(flow.id)
    assert sorted(retry_workflow(flow.id)) == sorted(job.id for job in jobs.values())
    run_until_finished([job.id for job in jobs.values()])
    assert sorted(tasks.read_lines(lines)) == ["a", "b", "c", "d"]
    state = get_workflow(flow.id)
    assert state is not None
    assert state.counts == {"success": 4}


# --- at rest: settled by the workflows pass, counted by state, forgotten ---


def settle_all(alias: str, now: int | None = None) -> int:
    return workflow_rest.settle(stores_for(alias), NAMESPACE, now or now_ms(), DAY_MS, 200)


def test_the_pass_settles_a_finished_workflow_and_counts_it_by_state(
    engine_db: str, tmp_path: Path
) -> None:
    kv = stores_for(engine_db).kv
    done = diamond(str(tmp_path / "l1"))
    jobs = done.enqueue()
    # On queue "reports", which the burst worker below does not serve: it stays live.
    Workflow().add("later", tasks.record.using(queue_name="reports"), "x", "y").enqueue()
    assert workflow_rest.count_by_state(kv, NAMESPACE) == {
        "running": 2,
        "failed": 0,
        "cancelled": 0,
        "succeeded": 0,
    }
    run_until_finished([job.id for job in jobs.values()])
    assert settle_all(engine_db) == 1
    assert settle_all(engine_db) == 0, "settled once"
    assert workflow_rest.count_by_state(kv, NAMESPACE) == {
        "running": 1,
        "failed": 0,
        "cancelled": 0,
        "succeeded": 1,
    }
    state = get_workflow(done.id)
    assert state is not None
    assert state.row.rest_state == "succeeded"
    assert state.row.finished_at_ms is not None
    assert state.row.expires_at_ms == state.row.finished_at_ms + DAY_MS


def test_a_workflow_past_its_expiry_is_forgotten_whole(engine_db: str, tmp_path: Path) -> None:
    stores = stores_for(engine_db)
    flow = Workflow()
    flow.add("charge", tasks.fail_once_without_retry, "card declined")
    flow.add("ship", tasks.record, str(tmp_path / "l"), "ship", after=["charge"])
    jobs = flow.enqueue()
    run_until_finished([job.id for job in jobs.values()])
    now = now_ms()
    settle_all(engine_db, now)
    assert workflow_rest.count_by_state(stores.kv, NAMESPACE)["failed"] == 1
    assert workflow_rest.forget(stores, NAMESPACE, now + DAY_MS - 1, 100) == 0
    assert workflow_rest.forget(stores, NAMESPACE, now + DAY_MS, 100) == 1
    assert get_workflow(flow.id) is None
    start, stop = workflow_count_bounds(NAMESPACE, flow.id)
    assert stores.kv.counter_scan(start, stop, 100) == []
    assert workflows.job_ids(stores, NAMESPACE, flow.id) == []
    assert workflow_rest.count_by_state(stores.kv, NAMESPACE)["failed"] == 0


def test_retry_wakes_a_settled_workflow(engine_db: str, tmp_path: Path) -> None:
    stores = stores_for(engine_db)
    lines = str(tmp_path / "lines")
    flow = Workflow()
    flow.add("reserve", tasks.fail_first_time_without_retry, str(tmp_path / "seen"))
    flow.add("ship", tasks.record, lines, "ship", after=["reserve"])
    jobs = flow.enqueue()
    run_until_finished([job.id for job in jobs.values()])
    now = now_ms()
    settle_all(engine_db, now)
    assert workflow_rest.count_by_state(stores.kv, NAMESPACE)["failed"] == 1

    retry_workflow(flow.id)
    counts = workflow_rest.count_by_state(stores.kv, NAMESPACE)
    assert (counts["running"], counts["failed"]) == (1, 0)
    state = get_workflow(flow.id)
    assert state is not None
    assert state.row.rest_state is None
    assert workflow_rest.forget(stores, NAMESPACE, now + 2 * DAY_MS, 100) == 0, "no expiry left"
    run_until_finished([job.id for job in jobs.values()])
    assert settle_all(engine_db) == 1
    assert workflow_rest.count_by_state(stores.kv, NAMESPACE)["succeeded"] == 1
