"""Which job a worker takes: the highest priority first, and only from its queues."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import override_settings

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResultDoesNotExist, TaskResultStatus
from tests.engine import tasks
from tests.engine.support import result, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_jobs_run_highest_priority_first_on_a_single_thread_worker(
    engine_db: str, tmp_path: Path
) -> None:
    order = str(tmp_path / "order")
    for priority in (-5, 50, 0):
        tasks.record.using(priority=priority).enqueue(order, str(priority))

    run_burst(concurrency=1)

    assert tasks.read_lines(order) == ["50", "0", "-5"]


def test_jobs_of_equal_priority_run_in_enqueue_order(engine_db: str, tmp_path: Path) -> None:
    order = str(tmp_path / "order")
    enqueue_many(tasks.record, [((order, str(n)), {}) for n in range(5)])
    tasks.record.using(priority=1).enqueue(order, "urgent")
    enqueue_many(tasks.record, [((order, str(n)), {}) for n in range(5, 8)])

    run_burst(concurrency=1)

    assert tasks.read_lines(order) == ["urgent", *(str(n) for n in range(8))]


def test_a_job_on_another_queue_runs_only_on_a_worker_of_that_queue(engine_db: str) -> None:
    enqueued = tasks.add_on_emails.enqueue(1, 2)

    run_burst(queues=["default", "reports"])
    assert result(enqueued.id).status == TaskResultStatus.READY

    run_burst(queues=["emails"])
    found = result(enqueued.id)
    assert found.status == TaskResultStatus.SUCCESSFUL
    assert found.return_value == 3


def test_a_worker_runs_only_the_jobs_of_its_namespace(engine_db: str) -> None:
    other = {"NAMESPACE": "other", "DATABASE": engine_db}
    with override_settings(LATER=other):
        enqueued = tasks.add.enqueue(1, 2)

    run_burst()
    with override_settings(LATER=other):
        assert result(enqueued.id).status == TaskResultStatus.READY
    with pytest.raises(TaskResultDoesNotExist):
        result(enqueued.id)

    with override_settings(LATER=other):
        run_burst()
        found = result(enqueued.id)
    assert found.status == TaskResultStatus.SUCCESSFUL
    assert found.return_value == 3
