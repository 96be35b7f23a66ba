"""docs/workflows.md's worked example runs as written: the mail carries the shipment id
from its parent's result; an out-of-stock warehouse fails the shipment and the mail,
naming the culprit, and a retry after the stock is back runs only what failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from later_django.compat.tasks import TaskResultStatus
from later_django.workflow import get_workflow, retry_workflow, workflow_jobs
from tests.engine import order_tasks
from tests.engine.support import result, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_the_order_pipeline_mails_the_shipment_id_of_its_parent(
    engine_db: str, tmp_path: Path
) -> None:
    sent = tmp_path / "sent"
    flow = order_tasks.place_order(1042, str(sent))
    run_until_finished(workflow_jobs(flow.id))
    assert sent.read_text() == "order 1042: your parcel is sh_1042\n"
    state = get_workflow(flow.id)
    assert state is not None
    assert (state.state, state.counts) == ("succeeded", {"success": 6})


def test_an_out_of_stock_warehouse_fails_the_shipment_and_a_retry_runs_what_failed(
    engine_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(order_tasks, "OUT_OF_STOCK", {("east", 13)})
    sent = tmp_path / "sent"
    flow = order_tasks.place_order(13, str(sent))
    jobs = workflow_jobs(flow.id)
    run_until_finished(jobs)
    assert not sent.exists()
    state = get_workflow(flow.id)
    assert state is not None
    assert (state.state, state.counts) == ("failed", {"success": 3, "failed": 3})
    failed = [result(job) for job in jobs if result(job).status == TaskResultStatus.FAILED]
    reasons = sorted(job.errors[-1].exception_class_path.rsplit(".", 1)[1] for job in failed)
    assert reasons == ["LookupError", "ParentFailed", "ParentFailed"]

    order_tasks.OUT_OF_STOCK.clear()
    again = retry_workflow(flow.id)
    assert len(again) == 3
    run_until_finished(jobs)
    assert sent.read_text() == "order 13: your parcel is sh_13\n"
    state = get_workflow(flow.id)
    assert state is not None
    assert (state.state, state.counts) == ("succeeded", {"success": 6})
