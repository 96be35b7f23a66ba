"""Failed attempts are retried by the task's policy; every attempt's error is kept."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.test import override_settings

from later_django.compat.tasks import TaskResultStatus
from later_django.storage.stores import stores_for
from tests.engine import failure_tasks, tasks
from tests.engine.support import NAMESPACE, result, run_burst, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_a_task_that_always_fails_ends_failed_after_its_retries_with_every_error_kept(
    engine_db: str,
) -> None:
    enqueued = tasks.fail_always.enqueue("no luck")

    [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 3
    assert len(failed.worker_ids) == 3
    assert len(failed.errors) == 3
    for error in failed.errors:
        assert error.exception_class_path == "tests.engine.tasks.Boom"
        assert error.traceback.startswith("Traceback (most recent call last):")
        assert "tests.engine.tasks.Boom: no luck" in error.traceback
        assert "in fail_always\n    raise Boom(message)" in error.traceback
    # Two fixed 0.2 s back-offs lie between the first and the last attempt.
    assert failed.last_attempted_at - failed.started_at >= timedelta(seconds=0.4)
    assert failed.finished_at >= failed.last_attempted_at
    with pytest.raises(ValueError, match="Task failed"):
        _ = failed.return_value
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"failed": 1}


def test_a_task_that_fails_once_then_succeeds_keeps_the_one_error(
    engine_db: str, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    enqueued = tasks.fail_first_time.enqueue(str(marks))

    [succeeded] = run_until_finished([enqueued.id])

    assert succeeded.status == TaskResultStatus.SUCCESSFUL
    assert succeeded.return_value == "second time lucky"
    assert succeeded.attempts == 2
    assert [error.exception_class_path for error in succeeded.errors] == ["tests.engine.tasks.Boom"]
    assert "first attempt fails" in succeeded.errors[0].traceback
    assert tasks.read_lines(marks) == ["failed", "succeeded"]
    assert succeeded.last_attempted_at - succeeded.started_at >= timedelta(seconds=0.2)
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"success": 1}


def test_a_task_without_retries_fails_after_one_attempt(engine_db: str) -> None:
    enqueued = tasks.fail_once_without_retry.enqueue("once")

    [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 1
    assert [error.exception_class_path for error in failed.errors] == ["tests.engine.tasks.Boom"]


def test_the_server_retry_setting_applies_to_a_task_without_its_own(engine_db: str) -> None:
    retry = {"max_retries": 1, "backoff": "immediate"}
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": engine_db, "RETRY": retry}):
        enqueued = tasks.fail_with_server_policy.enqueue("server policy")
        [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 2
    assert len(failed.errors) == 2


def test_a_retry_policy_is_fixed_at_the_first_failure(engine_db: str) -> None:
    """A job already retrying keeps the policy it started with when settings change."""
    first = {"max_retries": 2, "backoff": "fixed", "initial": 0.2}
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": engine_db, "RETRY": first}):
        enqueued = tasks.fail_with_server_policy.enqueue("policy kept")
        run_burst()
        assert result(enqueued.id).attempts == 1
    changed = {"max_retries": 0}
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": engine_db, "RETRY": changed}):
        [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 3


@pytest.mark.parametrize(
    ("task", "reason"),
    [
        (
            failure_tasks.return_a_set,
            "Unsupported type: the return value is {1, 2} of type builtins.set, "
            "which is not JSON serializable",
        ),
        (
            failure_tasks.return_nan,
            "the return value['ratio'] is nan, which is not JSON serializable",
        ),
    ],
    ids=["set", "nan"],
)
def test_a_return_value_json_cannot_hold_fails_the_job_at_once_without_retries(
    engine_db: str, tmp_path: Path, task, reason: str
) -> None:
    """The task ran to its end: a retry would repeat its side effects for nothing."""
    runs = tmp_path / "runs"
    enqueued = task.enqueue(str(runs))

    [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    assert tasks.read_lines(runs) == ["ran"]
    assert failed.attempts == 1
    [error] = failed.errors
    assert error.exception_class_path == "builtins.TypeError"
    assert reason in error.traceback
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {"failed": 1}
