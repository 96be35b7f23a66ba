"""The worker runs only registered tasks, each job once, and recovers jobs of lost workers."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from django.db import connections
from django.test import override_settings

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResultStatus
from later_django.conf import later_settings
from later_django.core.keys import job_key
from later_django.core.records import decode_record
from later_django.engine.enqueue import NewJob, enqueue_jobs
from later_django.engine.execution.start import start_batch
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, result, run_burst, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_a_record_naming_a_plain_function_fails_without_calling_it(
    engine_db: str, tmp_path: Path
) -> None:
    called = tmp_path / "called"
    [record] = enqueue_jobs(
        [
            NewJob(
                task_path="tests.engine.tasks.append_line",
                args=[str(called), "called"],
                kwargs={},
                queue_name="default",
                priority=0,
                backend="default",
            )
        ],
        stores=stores_for(engine_db),
        namespace=NAMESPACE,
    )

    run_burst()

    assert not called.exists()
    storage = stores_for(engine_db)
    stored = decode_record(storage.kv.get(job_key(NAMESPACE, record.job_id)))
    assert stored.stage == "failed"
    assert [error.exception_class_path for error in stored.errors] == [
        "later_django.exceptions.UnregisteredTaskError"
    ]
    assert "not a registered django.tasks.Task" in stored.errors[0].traceback
    assert storage.index.job_index_stage_counts(NAMESPACE) == {"failed": 1}


def test_a_return_value_that_is_not_json_fails_the_job_naming_it(engine_db: str) -> None:
    with override_settings(
        LATER={"NAMESPACE": NAMESPACE, "DATABASE": engine_db, "RETRY": {"max_retries": 0}}
    ):
        enqueued = tasks.return_a_set.enqueue()
        [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    assert [error.exception_class_path for error in failed.errors] == ["builtins.TypeError"]
    assert "the return value is {1, 2} of type builtins.set" in failed.errors[0].traceback


def test_two_workers_run_each_of_200_jobs_exactly_once(engine_db: str, tmp_path: Path) -> None:
    order = str(tmp_path / "order")
    labels = [str(n) for n in range(200)]
    enqueued = enqueue_many(tasks.record, [((order, label), {}) for label in labels])
    failures: list[BaseException] = []

    def work() -> None:
        try:
            run_burst(concurrency=4)
        except BaseException as error:
            failures.append(error)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=work) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    assert not failures
    assert sorted(tasks.read_lines(order), key=int) == labels
    results = [result(job.id) for job in enqueued]
    assert all(found.status == TaskResultStatus.SUCCESSFUL for found in results)
    assert all(found.attempts == 1 for found in results)
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"success": 200}


def test_a_job_left_running_by_a_lost_worker_is_retried_with_a_worker_lost_error(
    engine_db: str,
) -> None:
    lease_ms = 50
    with override_settings(
        LATER={
            "NAMESPACE": NAMESPACE,
            "DATABASE": engine_db,
            "RETRY": {"max_retries": 1, "backoff": "immediate"},
        }
    ):
        enqueued = tasks.add.enqueue(3, 4)
        messages = stores_for(engine_db).queue.claim(NAMESPACE, ["default"], "lost", lease_ms)
        start_batch(
            messages,
            stores=stores_for(engine_db),
            namespace=NAMESPACE,
            worker_id="lost",
            lease_ms=lease_ms,
            settings=later_settings(),
        )
        assert result(enqueued.id).status == TaskResultStatus.RUNNING
        time.sleep(lease_ms / 1000 + 0.05)  # the lost worker's leases lapse

        [found] = run_until_finished([enqueued.id])

    assert found.status == TaskResultStatus.SUCCESSFUL
    assert found.return_value == 7
    assert found.attempts == 2
    assert found.worker_ids[0] == "lost"
    assert [error.exception_class_path for error in found.errors] == [
        "later_django.exceptions.WorkerLost"
    ]
    assert "worker lost stopped renewing" in found.errors[0].traceback
