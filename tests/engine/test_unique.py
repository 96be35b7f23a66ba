"""Unique jobs on both databases: ``@task(unique=...)`` and ``api.enqueue_unique``.
A second enqueue while the key's job is in the ``while`` stages writes nothing and
returns that job; the key is free again once the job leaves them, its period ends,
or its enqueue rolls back; concurrent enqueues from threads and from two processes
write one job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from later_django import api
from later_django.compat.tasks import InvalidTask, TaskResultStatus, task, task_enqueued
from later_django.core.clock import now_ms
from later_django.core.keys import unique_key
from later_django.engine.job_actions import one_job
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, key_column, result, run_burst
from tests.maintenance.test_processes import REPOSITORY, database_settings
from tests.threads import at_once

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def queued(alias: str) -> int:
    return stores_for(alias).queue.depth(NAMESPACE)


def expire_key(alias: str, task_path: str, key: str) -> None:
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"UPDATE later_storage SET date_expire = %s WHERE {key_column(alias)} = %s",
            [now_ms() - 1_000, unique_key(NAMESPACE, task_path, key)],
        )


# --- one process ---


def test_a_second_enqueue_with_the_same_arguments_returns_the_first_job(engine_db: str) -> None:
    sent: list[str] = []

    def on_enqueued(sender: Any, task_result: Any, **_: Any) -> None:
        sent.append(task_result.id)

    task_enqueued.connect(on_enqueued)
    try:
        first = tasks.unique_by_arguments.enqueue(1, 2)
        second = tasks.unique_by_arguments.enqueue(1, 2)
        other = tasks.unique_by_arguments.enqueue(2, 1)
    finally:
        task_enqueued.disconnect(on_enqueued)

    assert second.id == first.id and other.id != first.id
    assert second.status == TaskResultStatus.READY and second.args == [1, 2]
    assert queued(engine_db) == 2
    assert sent == [first.id, other.id], "a duplicate is not announced as enqueued"


def test_the_key_callable_picks_what_makes_a_duplicate(engine_db: str) -> None:
    first = tasks.sync_user.enqueue(7, note="first")
    again = tasks.sync_user.enqueue(7, note="second")
    other_user = tasks.sync_user.enqueue(8)

    assert again.id == first.id and again.kwargs == {"note": "first"}
    assert other_user.id != first.id
    assert queued(engine_db) == 2


def test_keys_are_per_task(engine_db: str) -> None:
    one = api.enqueue_unique(tasks.add, "shared", 1, 1)
    two = api.enqueue_unique(tasks.add_on_emails, "shared", 1, 1)
    assert one.id != two.id
    assert api.enqueue_unique(tasks.add, "shared", 5, 5).id == one.id


def test_the_key_is_free_again_once_its_job_has_finished(engine_db: str) -> None:
    first = tasks.unique_by_arguments.enqueue(1, 2)
    run_burst()
    assert result(first.id).status == TaskResultStatus.SUCCESSFUL

    second = tasks.unique_by_arguments.enqueue(1, 2)

    assert second.id != first.id and second.status == TaskResultStatus.READY
    assert tasks.unique_by_arguments.enqueue(1, 2).id == second.id


def test_the_while_stages_bound_the_duplicate(engine_db: str) -> None:
    later = timezone.now() + timedelta(hours=1)
    delayed = tasks.nightly_report.using(run_after=later).enqueue()
    assert tasks.nightly_report.using(run_after=later).enqueue().id == delayed.id

    one_job.run_now(engine_db, NAMESPACE, delayed.id)  # enqueued: not in "while"
    fresh = tasks.nightly_report.enqueue()

    assert fresh.id != delayed.id
    assert queued(engine_db) == 2


def test_the_key_is_free_again_when_its_period_ends(engine_db: str) -> None:
    first = tasks.unique_for_a_minute.enqueue()
    assert tasks.unique_for_a_minute.enqueue().id == first.id
    held = stores_for(engine_db).kv.get(
        unique_key(NAMESPACE, tasks.unique_for_a_minute.module_path, "short")
    )
    assert held == first.id.encode()

    expire_key(engine_db, tasks.unique_for_a_minute.module_path, "short")
    second = tasks.unique_for_a_minute.enqueue()

    assert second.id != first.id
    assert result(first.id).status == TaskResultStatus.READY, "the first job is still queued"


def test_a_rolled_back_enqueue_holds_no_key(engine_db: str) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using=engine_db):
        tasks.sync_user.enqueue(3)
        raise RuntimeError("the caller's work failed")

    kept = tasks.sync_user.enqueue(3)

    assert queued(engine_db) == 1
    assert result(kept.id).status == TaskResultStatus.READY


def test_enqueue_many_writes_one_job_per_key(engine_db: str) -> None:
    existing = tasks.sync_user.enqueue(1)
    calls = [((1,), {}), ((2,), {}), ((2,), {"note": "again"}), ((3,), {})]

    ids = api.enqueue_many(tasks.sync_user, calls, ids_only=True)

    assert ids[0] == existing.id
    assert ids[1] == ids[2] and len({ids[1], ids[3], existing.id}) == 3
    assert queued(engine_db) == 3


def test_enqueue_unique_of_a_task_without_the_option_holds_while_live(engine_db: str) -> None:
    first = api.enqueue_unique(tasks.add, "invoice-42", 1, 2)
    assert api.enqueue_unique(tasks.add, "invoice-42", 3, 4).id == first.id
    assert tasks.add.enqueue(1, 2).id != first.id, "a plain enqueue is never deduplicated"
    run_burst()
    assert api.enqueue_unique(tasks.add, "invoice-42", 1, 2).id != first.id


@pytest.mark.parametrize(
    ("option", "rule"),
    [
        ("key", "must be a dict"),
        ({"keys": "x"}, "unknown keys ['keys']"),
        ({"key": ""}, "must be a non-empty string"),
        ({"for_seconds": 0}, "positive number of seconds"),
        ({"for_seconds": True}, "positive number of seconds"),
        ({"while": "enqueued"}, "must be a list of stages"),
        ({"while": ["queued"]}, "must name at least one stage"),
        ({"while": []}, "must name at least one stage"),
    ],
)
def test_a_bad_unique_option_is_refused_when_the_task_is_defined(option: Any, rule: str) -> None:
    with pytest.raises(InvalidTask, match=rule.replace("[", r"\[").replace("]", r"\]")):

        @task(unique=option)
        def broken() -> None: ...


def test_a_key_callable_returning_no_string_names_the_task(engine_db: str) -> None:
    with pytest.raises(ValueError, match=r"the key by the unique option of task .*keyed_by"):
        tasks.keyed_by_its_argument.enqueue(5)
    assert tasks.keyed_by_its_argument.enqueue("fine").id
    with pytest.raises(ValueError, match="enqueue_unique's key must be a non-empty string"):
        api.enqueue_unique(tasks.add, "", 1, 2)
    assert queued(engine_db) == 1


# --- concurrent enqueues ---


def test_threads_enqueueing_one_key_at_once_write_one_job(engine_db: str) -> None:
    def enqueue(_: int) -> str:
        with transaction.atomic(using=engine_db):
            return tasks.sync_user.enqueue(99).id

    ids = at_once(enqueue, 8)

    assert len(set(ids)) == 1
    assert queued(engine_db) == 1


def test_two_processes_enqueueing_one_key_a_hundred_times_write_one_job(engine_db: str) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.worker.worker_settings",
        "PYTHONPATH": str(REPOSITORY),
        "LATER_WORKER_DATABASE": json.dumps(database_settings(engine_db)),
        "LATER_TEST_SQLITE_DIR": str(settings.SQLITE_DIRECTORY),
    }
    start_at = time.time() + 3.0  # both processes set up by then
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.engine.unique_enqueuer", str(start_at), "100", "5"],
            env=env,
            cwd=REPOSITORY,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]

    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr.decode()
    ids = [job_id for stdout, _ in outputs for job_id in json.loads(stdout)]
    assert len(ids) == 200 and len(set(ids)) == 1
    assert queued(engine_db) == 1
    assert result(ids[0]).status == TaskResultStatus.READY
