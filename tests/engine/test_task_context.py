"""Tasks that take a context see their attempt; async tasks run and return."""

from __future__ import annotations

from pathlib import Path

import pytest
from asgiref.sync import async_to_sync

from later_django.compat.tasks import TaskResultStatus
from tests.engine import tasks
from tests.engine.support import run_burst, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_context_attempt_is_1_on_the_first_run_and_2_on_the_retry(
    engine_db: str, tmp_path: Path
) -> None:
    seen = tmp_path / "attempts"
    enqueued = tasks.attempt_seen.enqueue(str(seen))

    [found] = run_until_finished([enqueued.id])

    assert tasks.read_lines(seen) == ["1", "2"]
    assert found.status == TaskResultStatus.SUCCESSFUL
    assert found.return_value == 2
    assert found.attempts == 2
    assert len(found.errors) == 1


def test_an_async_task_runs_and_returns_its_value(engine_db: str) -> None:
    enqueued = tasks.async_double.enqueue(21)

    [found] = run_until_finished([enqueued.id])

    assert found.status == TaskResultStatus.SUCCESSFUL
    assert found.return_value == 42


def test_aenqueue_and_aget_result_work_from_async_code(engine_db: str) -> None:
    enqueued = async_to_sync(tasks.add.aenqueue)(5, 6)
    run_burst()

    found = async_to_sync(tasks.add.aget_result)(enqueued.id)

    assert found.status == TaskResultStatus.SUCCESSFUL
    assert found.return_value == 11
