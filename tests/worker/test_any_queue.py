"""``QUEUES: []`` (any queue name, as Django's settings reference says) in real workers.

The test process and the ``later_worker`` subprocesses (settings
:mod:`tests.worker.any_queue_settings`) both have a ``LaterBackend`` with
``QUEUES: []``. A worker without ``--queue`` claims every queue of the
namespace, queues first used after it started too; ``--queue NAME`` takes any
name but one starting with ``__later`` (reserved).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from later_django.compat.tasks import TaskResultStatus
from tests.task_backends import any_queue_backends, tasks_setting
from tests.worker import tasks
from tests.worker.test_worker_process import (
    START_SECONDS,
    Workers,
    finished,
    row_of,
    status_of,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

ANY_QUEUE_SETTINGS = ("--settings", "tests.worker.any_queue_settings")


@pytest.fixture
def any_queue(alias: str) -> Iterator[str]:
    """The case's database, with ``TASKS`` of the test process at ``QUEUES: []``."""
    with tasks_setting(any_queue_backends("default")):
        yield alias


def test_a_worker_for_any_queue_runs_every_queue_it_finds_also_new_ones(
    any_queue: str, workers: Workers, lines: Path
) -> None:
    before = tasks.record.using(queue_name="signups").enqueue(str(lines), "before")
    worker = workers.start(any_queue, *ANY_QUEUE_SETTINGS)
    wait_for(lambda: finished(before), START_SECONDS, "job of queue 'signups' ran", workers)
    row = wait_for(lambda: row_of(any_queue, worker.pid), 5, "worker row", workers)

    # A queue nobody used when the worker started, at a priority it never saw.
    new = tasks.record.using(queue_name="brand-new", priority=3).enqueue(str(lines), "new")

    done = wait_for(lambda: finished(new), 15, "job of queue 'brand-new' ran", workers)
    assert done.status == TaskResultStatus.SUCCESSFUL, workers.logs()
    assert status_of(before) == TaskResultStatus.SUCCESSFUL
    assert row["queues"] == ["*"]
    assert "queues *," in worker.log()
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0, worker.describe()


def test_queue_takes_any_name_when_queues_is_empty_and_runs_only_those(
    any_queue: str, workers: Workers, lines: Path
) -> None:
    picked = tasks.record.using(queue_name="picked-queue").enqueue(str(lines), "picked")
    left = tasks.record.using(queue_name="left-alone").enqueue(str(lines), "left")

    burst = workers.start(any_queue, *ANY_QUEUE_SETTINGS, "--burst", "--queue", "picked-queue")

    assert burst.wait_exit(START_SECONDS) == 0, burst.describe()
    assert status_of(picked) == TaskResultStatus.SUCCESSFUL
    assert status_of(left) == TaskResultStatus.READY


def test_queue_refuses_a_reserved_name_even_when_any_name_is_allowed(any_queue: str) -> None:
    with pytest.raises(CommandError, match=r"--queue __later_jobs: queue names starting with "):
        call_command("later_worker", "--queue", "default", "--queue", "__later_jobs")


def test_queue_still_refuses_a_name_the_listed_queues_lack(alias: str) -> None:
    # tests.settings: QUEUES ["default", "emails", "reports"].
    with pytest.raises(CommandError, match=r"--queue nope: not a queue of any LaterBackend"):
        call_command("later_worker", "--queue", "nope")
