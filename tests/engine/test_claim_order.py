"""Which job a worker takes: the highest priority first, and only from its queues."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import override_settings
from django.utils import timezone

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


def test_due_jobs_run_by_priority_then_by_run_after_whatever_order_they_were_deferred_in(
    engine_db: str, tmp_path: Path
) -> None:
    """Django's order of ready tasks (django-tasks-db's test_run_after_priority):
    priority, highest first, then the earliest ``run_after``. Several jobs share each
    of two ``run_after`` times, the later time deferred first (promotion once
    published them in job id order, so ``late10`` ran before ``early10``); one
    promotion makes all of them ready and a real single-thread claim takes them."""
    order = str(tmp_path / "order")
    now = timezone.now()
    early, late = now + timedelta(milliseconds=300), now + timedelta(milliseconds=400)
    deferred = [
        ("late0", 0, late),
        ("late10", 10, late),
        ("late-3", -3, late),
        ("early0", 0, early),
        ("early5", 5, early),
        ("early10", 10, early),
        ("early0b", 0, early),
    ]
    for label, priority, run_after in deferred:
        tasks.record.using(priority=priority, run_after=run_after).enqueue(order, label)
    time.sleep(max(0.0, (late - timezone.now()).total_seconds()) + 0.02)

    run_burst(concurrency=1)

    assert tasks.read_lines(order) == [
        "early10",
        "late10",
        "early5",
        "early0",
        "early0b",
        "late0",
        "late-3",
    ]
