"""``get_result`` reports every stage as django.tasks' status, with its times and workers."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from later_django.api import continue_with
from later_django.compat.tasks import (
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task_backends,
)
from later_django.conf import later_settings
from later_django.engine.execution.finish import finish_and_continue
from later_django.engine.execution.start import start_batch
from later_django.engine.execution.values import Outcome
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, result, run_burst, run_until_finished
from tests.task_backends import any_queue_backends, tasks_setting

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

WORKER = "test-host:1:abcdef"


def assert_not_started(found) -> None:
    assert found.status == TaskResultStatus.READY
    assert found.started_at is None
    assert found.last_attempted_at is None
    assert found.finished_at is None
    assert found.worker_ids == []
    assert found.attempts == 0
    assert found.errors == []
    with pytest.raises(ValueError, match="not finished yet"):
        _ = found.return_value


def test_an_enqueued_job_is_ready_with_its_enqueue_time(engine_db: str) -> None:
    before = timezone.now()
    enqueued = tasks.add.enqueue(1, 2)

    found = result(enqueued.id)

    assert_not_started(found)
    assert before - timedelta(milliseconds=1) <= found.enqueued_at <= timezone.now()
    assert found.args == [1, 2]
    assert found.kwargs == {}
    assert found.task.module_path == "tests.engine.tasks.add"
    assert found.backend == "default"


def test_a_delayed_job_is_ready(engine_db: str) -> None:
    enqueued = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 2)

    found = result(enqueued.id)

    assert_not_started(found)
    assert found.enqueued_at is not None
    assert stores_for(engine_db).index.job_index_get(NAMESPACE, enqueued.id).stage == "delayed"


def test_a_waiting_continuation_is_ready(engine_db: str) -> None:
    parent = tasks.add.enqueue(1, 2)
    child = continue_with(parent.id, tasks.add, 3, 4)

    found = result(child.id)

    assert_not_started(found)
    assert stores_for(engine_db).index.job_index_get(NAMESPACE, child.id).stage == "waiting"


def test_a_started_job_is_running_with_its_start_time_and_worker(engine_db: str) -> None:
    enqueued = tasks.add.enqueue(20, 22)
    settings = later_settings()
    messages = stores_for(engine_db).queue.claim(NAMESPACE, ["default"], WORKER, 30_000)
    before_start = timezone.now()

    [started] = start_batch(
        messages,
        stores=stores_for(engine_db),
        namespace=NAMESPACE,
        worker_id=WORKER,
        lease_ms=30_000,
        settings=settings,
    )

    running = result(enqueued.id)
    assert running.status == TaskResultStatus.RUNNING
    assert running.worker_ids == [WORKER]
    assert running.attempts == 1
    assert running.started_at >= before_start - timedelta(milliseconds=1)
    assert running.last_attempted_at == running.started_at
    assert running.enqueued_at <= running.started_at
    assert running.finished_at is None
    with pytest.raises(ValueError, match="not finished yet"):
        _ = running.return_value

    finish_and_continue(
        [Outcome(started, return_value=42)],
        stores=stores_for(engine_db),
        namespace=NAMESPACE,
        worker_id=WORKER,
        settings=settings,
    )

    finished = result(enqueued.id)
    assert finished.status == TaskResultStatus.SUCCESSFUL
    assert finished.return_value == 42
    assert finished.started_at == running.started_at
    assert finished.finished_at >= finished.started_at


def test_a_job_is_running_while_a_worker_runs_it(engine_db: str, tmp_path: Path) -> None:
    release = tmp_path / "release"
    enqueued = tasks.wait_for_file.enqueue(str(release), 20.0)
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
    try:
        deadline = time.monotonic() + 10
        while (found := result(enqueued.id)).status == TaskResultStatus.READY:
            assert time.monotonic() < deadline, "the worker did not start the job"
            time.sleep(0.01)
        assert found.status == TaskResultStatus.RUNNING
        assert found.started_at is not None
        assert found.finished_at is None
        assert len(found.worker_ids) == 1
    finally:
        release.touch()
        worker.join(timeout=30)
    assert not failures
    finished = result(enqueued.id)
    assert finished.status == TaskResultStatus.SUCCESSFUL
    assert finished.return_value == "released"
    assert finished.worker_ids == found.worker_ids


def test_a_successful_job_has_its_return_value_and_times(engine_db: str) -> None:
    enqueued = tasks.add.enqueue(2, 3)

    run_burst()

    found = result(enqueued.id)
    assert found.status == TaskResultStatus.SUCCESSFUL
    assert found.is_finished
    assert found.return_value == 5
    assert found.enqueued_at <= found.started_at <= found.finished_at
    assert found.last_attempted_at == found.started_at
    assert len(found.worker_ids) == 1
    assert found.errors == []


def test_a_failed_job_has_its_errors_and_times(engine_db: str) -> None:
    enqueued = tasks.fail_once_without_retry.enqueue("broken")

    [found] = run_until_finished([enqueued.id])

    assert found.status == TaskResultStatus.FAILED
    assert found.is_finished
    assert [error.exception_class_path for error in found.errors] == ["tests.engine.tasks.Boom"]
    assert "broken" in found.errors[0].traceback
    assert found.enqueued_at <= found.started_at <= found.finished_at
    assert len(found.worker_ids) == 1
    with pytest.raises(ValueError, match="Task failed"):
        _ = found.return_value


def test_refresh_reloads_a_result_from_the_database(engine_db: str) -> None:
    enqueued = tasks.add.enqueue(4, 5)
    assert enqueued.status == TaskResultStatus.READY

    run_burst()
    enqueued.refresh()

    assert enqueued.status == TaskResultStatus.SUCCESSFUL
    assert enqueued.return_value == 9


def test_an_unknown_id_does_not_exist(engine_db: str) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        result("01NOSUCHJOB0000000000000000")


def test_a_task_reading_another_tasks_result_is_told_they_differ(engine_db: str) -> None:
    enqueued = tasks.add.enqueue(1, 1)
    with pytest.raises(TaskResultMismatch):
        tasks.record.get_result(enqueued.id)
    assert tasks.add.get_result(enqueued.id).id == enqueued.id


# --- the job's own task: what enqueue() returned, get_result() gives back ---


def test_get_result_gives_back_the_queue_and_priority_the_job_was_enqueued_with(
    engine_db: str,
) -> None:
    enqueued = tasks.add.using(priority=10, queue_name="emails").enqueue(1, 2)

    found = result(enqueued.id)

    assert found == enqueued
    assert (found.task.queue_name, found.task.priority) == ("emails", 10)
    assert found.task.backend == found.backend == "default"
    # The registered task itself is unchanged, and still the one get_result resolves.
    assert (tasks.add.queue_name, tasks.add.priority) == ("default", 0)
    assert found.task.func is tasks.add.func
    assert tasks.add.get_result(enqueued.id) == enqueued


def test_get_result_gives_back_run_after_to_the_millisecond(engine_db: str) -> None:
    # Times are stored in epoch milliseconds; 2038-09-18 08:54:07.398 is one whose
    # float timestamp() * 1000 is ...397.9998.
    run_after = datetime(2038, 9, 18, 8, 54, 7, 398000, tzinfo=UTC)
    enqueued = tasks.add.using(run_after=run_after).enqueue(1, 2)

    found = result(enqueued.id)

    assert found == enqueued
    assert found.task.run_after == run_after


def test_a_run_after_finer_than_a_millisecond_reads_back_as_stored(engine_db: str) -> None:
    run_after = (timezone.now() + timedelta(hours=1)).replace(microsecond=123456)

    enqueued = tasks.add.using(run_after=run_after, priority=-5).enqueue(1, 2)

    assert enqueued.task.run_after == run_after.replace(microsecond=123000)
    assert result(enqueued.id) == enqueued


def test_get_result_gives_back_the_backend_alias_the_job_was_enqueued_through(
    engine_db: str,
) -> None:
    with tasks_setting(any_queue_backends("default", "other")):
        enqueued = tasks.add.using(backend="other", queue_name="anything").enqueue(3, 4)

        found = result(enqueued.id)  # read through the default backend

        assert found == enqueued
        assert found.backend == found.task.backend == "other"
        assert found.task.queue_name == "anything"
        assert found.task.get_backend() is task_backends["other"]


def test_a_job_reads_back_after_its_queue_left_queues(engine_db: str) -> None:
    enqueued = tasks.add.using(queue_name="reports").enqueue(1, 1)
    narrower = {"default": {"BACKEND": "later_django.backend.LaterBackend", "QUEUES": ["default"]}}

    with tasks_setting(narrower):
        found = result(enqueued.id)

    assert found.task.queue_name == "reports"
    assert found == enqueued


def test_a_task_given_its_context_sees_its_own_queue_and_priority(engine_db: str) -> None:
    enqueued = tasks.context_of_run.using(queue_name="reports", priority=7).enqueue()

    [found] = run_until_finished([enqueued.id], queues=["reports"])

    assert found.status == TaskResultStatus.SUCCESSFUL, found.errors
    assert found.return_value == {"queue_name": "reports", "priority": 7, "backend": "default"}
