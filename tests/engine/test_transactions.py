"""Enqueue joins the caller's transaction: a rollback leaves nothing, a commit runs the job."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from later_django.api import continue_with, enqueue_many
from later_django.compat.tasks import (
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, no_rows, result, row_counts, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


class CallerFailed(Exception):
    pass


def test_a_rolled_back_enqueue_leaves_no_record_index_row_or_delivery_row(engine_db: str) -> None:
    later = timezone.now() + timedelta(hours=1)
    with pytest.raises(CallerFailed), transaction.atomic(using=engine_db):
        ready = tasks.add.enqueue(1, 2)
        delayed = tasks.add.using(run_after=later).enqueue(3, 4)
        batch = enqueue_many(tasks.add, [((5, 6), {}), ((7, 8), {})])
        waiting = continue_with(ready.id, tasks.add, 9, 10)
        raise CallerFailed("the caller's own work failed")

    for job in [ready, delayed, *batch, waiting]:
        with pytest.raises(TaskResultDoesNotExist):
            result(job.id)
    assert row_counts(engine_db) == no_rows()
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 0


def test_an_enqueued_job_is_invisible_to_other_connections_until_the_commit(
    engine_db: str,
) -> None:
    seen_before_commit: list[bool] = []

    def look() -> None:
        try:
            seen_before_commit.append(stores_for(engine_db).queue.has_ready(NAMESPACE, ["default"]))
        finally:
            connections.close_all()

    with transaction.atomic(using=engine_db):
        enqueued = tasks.add.enqueue(2, 3)
        other = threading.Thread(target=look)
        other.start()
        other.join(timeout=10)
    assert seen_before_commit == [False]
    assert stores_for(engine_db).queue.has_ready(NAMESPACE, ["default"])
    assert result(enqueued.id).status == TaskResultStatus.READY


def test_a_committed_enqueue_runs_and_succeeds_with_its_return_value(engine_db: str) -> None:
    with transaction.atomic(using=engine_db):
        enqueued = tasks.add.enqueue(20, 22)

    run_burst()

    finished = result(enqueued.id)
    assert finished.status == TaskResultStatus.SUCCESSFUL
    assert finished.return_value == 42
    assert finished.args == [20, 22]
    assert row_counts(engine_db)["later_delivery_queue"] == 0


def test_task_enqueued_is_sent_on_commit_and_never_for_a_rollback(engine_db: str) -> None:
    sent: list[str] = []

    def receiver(sender, task_result, **kwargs) -> None:
        sent.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        with pytest.raises(CallerFailed), transaction.atomic(using=engine_db):
            tasks.add.enqueue(1, 2)
            raise CallerFailed("rolled back")
        assert sent == []

        with transaction.atomic(using=engine_db):
            committed = tasks.add.enqueue(3, 4)
            assert sent == []
        assert sent == [committed.id]
    finally:
        task_enqueued.disconnect(receiver)


def test_task_started_and_task_finished_are_sent_for_a_run(engine_db: str) -> None:
    seen: list[tuple[str, str, str]] = []

    def on_started(sender, task_result, **kwargs) -> None:
        seen.append(("started", task_result.id, task_result.status))

    def on_finished(sender, task_result, **kwargs) -> None:
        seen.append(("finished", task_result.id, task_result.status))

    task_started.connect(on_started)
    task_finished.connect(on_finished)
    try:
        enqueued = tasks.add.enqueue(1, 1)
        run_burst()
    finally:
        task_started.disconnect(on_started)
        task_finished.disconnect(on_finished)

    assert seen == [
        ("started", enqueued.id, TaskResultStatus.RUNNING),
        ("finished", enqueued.id, TaskResultStatus.SUCCESSFUL),
    ]
