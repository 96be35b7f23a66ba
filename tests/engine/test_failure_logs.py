"""What a failing job leaves in the log: Django's ``django.tasks`` ERROR line with the
task's exception and traceback when the job fails, a WARNING line from
``later_django.worker`` with the exception and its traceback for each failed attempt
that will be retried (each traceback once), and the import failure named when a job's
task path does not import."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from later_django.compat.tasks import TASKS_LOGGER_NAME, TaskResultStatus, task_finished
from later_django.conf import later_settings
from later_django.core.keys import job_key
from later_django.core.records import decode_record
from later_django.engine.enqueue import NewJob, enqueue_jobs
from later_django.storage.stores import stores_for
from tests.engine import failure_tasks
from tests.engine.support import NAMESPACE, result, run_burst, run_until_finished
from tests.engine.tasks import read_lines

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

RETRY_LINE = "attempt {n} of 3 failed with ValueError('flaky'); next run at "


def django_task_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [line for line in caplog.records if line.name == TASKS_LOGGER_NAME]


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        line
        for line in caplog.records
        if line.name == "later_django.worker" and "failed with" in line.getMessage()
    ]


def extra_fields(line: logging.LogRecord) -> dict[str, object]:
    """The job fields later_django puts in a log record's ``extra`` (the duration
    left out: it is checked on its own)."""
    names = ("job_id", "task_path", "queue_name", "attempt")
    return {name: line.__dict__[name] for name in names if name in line.__dict__}


def test_a_failed_job_is_logged_by_django_with_its_exception_and_traceback(
    engine_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    runs = tmp_path / "runs"
    enqueued = failure_tasks.fail_with_value_error.enqueue(str(runs), "no luck")

    [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    [line] = [line for line in django_task_lines(caplog) if line.levelno == logging.ERROR]
    assert line.getMessage() == (
        f"Task id={enqueued.id} path={failure_tasks.fail_with_value_error.module_path} state=FAILED"
    )
    assert line.exc_info is not None and line.exc_info[0] is ValueError
    assert str(line.exc_info[1]) == "no luck"
    traceback = logging.Formatter().formatException(line.exc_info)
    assert "in fail_with_value_error\n    raise ValueError(message)" in traceback
    assert traceback.endswith("ValueError: no luck")
    # The traceback is the task's: the re-raise that hands it to receivers adds no frame.
    assert "_send_finished_handling" not in traceback


def test_each_retried_attempt_is_logged_at_warning_with_its_next_run(
    engine_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    runs = tmp_path / "runs"
    enqueued = failure_tasks.fail_twice_then_fail.enqueue(str(runs), "flaky")

    [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    assert read_lines(runs) == ["ran", "ran", "ran"]
    lines = retry_lines(caplog)
    assert [line.levelno for line in lines] == [logging.WARNING, logging.WARNING]
    for attempt, line in enumerate(lines, start=1):
        message = line.getMessage()
        assert message.startswith(
            f"job {enqueued.id} (task {failure_tasks.fail_twice_then_fail.module_path}, "
            f"queue default): {RETRY_LINE.format(n=attempt)}"
        ), message
        next_run = datetime.fromisoformat(message.rsplit("next run at ", 1)[1])
        assert next_run.utcoffset() == timedelta(0)
        # Fixed back-off of 0.2 s from the write, which the line follows (on a busy
        # machine, maybe by more than 0.2 s: the lower bound is loose).
        assert -1 < next_run.timestamp() - line.created <= 0.2, message
        assert extra_fields(line) == {
            "job_id": enqueued.id,
            "task_path": failure_tasks.fail_twice_then_fail.module_path,
            "queue_name": "default",
            "attempt": attempt,
        }
        assert isinstance(line.__dict__["duration"], float) and line.__dict__["duration"] > 0
        # The retried attempt's exception, with the task's traceback, logged here once.
        assert line.exc_info is not None and line.exc_info[0] is ValueError
        assert str(line.exc_info[1]) == "flaky"
        traceback = logging.Formatter().formatException(line.exc_info)
        assert "in fail_twice_then_fail\n    raise ValueError(message)" in traceback
    # A retried attempt does not finish the task: Django logs the final failure only.
    errors = [line for line in django_task_lines(caplog) if line.levelno == logging.ERROR]
    assert len(errors) == 1
    assert errors[0].exc_info is not None and str(errors[0].exc_info[1]) == "flaky"
    # Each attempt's traceback is logged once: two retries, one final failure.
    with_tracebacks = [line for line in caplog.records if line.exc_info is not None]
    assert len(with_tracebacks) == 3


def test_an_immediate_retry_is_logged_with_the_time_it_became_ready(
    engine_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    runs = tmp_path / "runs"
    enqueued = failure_tasks.fail_once_then_succeed.enqueue(str(runs))

    [succeeded] = run_until_finished([enqueued.id])

    assert succeeded.status == TaskResultStatus.SUCCESSFUL
    [line] = retry_lines(caplog)
    message = line.getMessage()
    assert "attempt 1 of 2 failed with ValueError('first attempt'); next run at " in message
    next_run = datetime.fromisoformat(message.rsplit("next run at ", 1)[1])
    assert -1 < next_run.timestamp() - line.created <= 0, message
    finished = [line for line in django_task_lines(caplog) if "state=SUCCESSFUL" in line.message]
    assert len(finished) == 1 and finished[0].exc_info is None


def test_a_raising_task_finished_receiver_leaves_the_failure_written_and_is_logged(
    engine_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)

    def broken_receiver(sender, task_result, **kwargs) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("receiver broke")

    task_finished.connect(broken_receiver)
    try:
        enqueued = failure_tasks.fail_with_value_error.enqueue(str(tmp_path / "runs"), "x")
        run_burst()
    finally:
        task_finished.disconnect(broken_receiver)

    assert result(enqueued.id).status == TaskResultStatus.FAILED
    [line] = [line for line in caplog.records if "receiver failed" in line.getMessage()]
    assert line.getMessage() == f"a task_finished receiver failed for job {enqueued.id}"
    assert line.exc_info is not None and str(line.exc_info[1]) == "receiver broke"
    assert extra_fields(line)["job_id"] == enqueued.id
    run_burst()  # the worker went on; the failed job is not run again
    assert read_lines(tmp_path / "runs") == ["ran"]


def enqueue_with_task_path(task_path: str, tmp_path: Path) -> str:
    """A job whose record names ``task_path`` (enqueue itself does not import it)."""
    [record] = enqueue_jobs(
        [
            NewJob(
                task_path=task_path,
                args=[str(tmp_path / "runs"), "x"],
                kwargs={},
                queue_name="default",
                priority=0,
                backend="default",
            )
        ],
        stores=stores_for(later_settings().database),
        namespace=NAMESPACE,
    )
    return record.job_id


def recorded_error(engine_db: str, job_id: str) -> tuple[str, str]:
    stored = decode_record(stores_for(engine_db).kv.get(job_key(NAMESPACE, job_id)))
    assert stored.stage == "failed"
    [error] = stored.errors
    return error.exception_class_path, error.traceback


def test_a_task_path_whose_module_does_not_exist_fails_saying_the_import_failed(
    engine_db: str, tmp_path: Path
) -> None:
    job_id = enqueue_with_task_path("tests.engine.no_such_module.some_task", tmp_path)

    run_burst()

    path, reason = recorded_error(engine_db, job_id)
    assert path == "later_django.exceptions.UnregisteredTaskError"
    assert reason.startswith(
        "could not import task 'tests.engine.no_such_module.some_task': "
        "ModuleNotFoundError: No module named 'tests.engine.no_such_module'"
    ), reason


def test_a_task_module_that_raises_while_imported_fails_the_job_not_the_worker(
    engine_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "later_broken_tasks.py").write_text("raise RuntimeError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = enqueue_with_task_path("later_broken_tasks.some_task", tmp_path)
    fine = failure_tasks.fail_once_then_succeed.enqueue(str(tmp_path / "fine"))

    [done] = run_until_finished([fine.id])

    assert done.status == TaskResultStatus.SUCCESSFUL
    _, reason = recorded_error(engine_db, broken)
    assert reason.startswith(
        "could not import task 'later_broken_tasks.some_task': RuntimeError: no config"
    ), reason


def test_a_later_worker_process_writes_the_retry_warning_to_stderr(
    alias: str,
    workers,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """What an operator sees without any ``LOGGING``: the real ``later_worker`` writes
    the ``later_django`` lines to stderr, the retry among them."""
    runs = tmp_path / "runs"
    enqueued = failure_tasks.fail_once_then_succeed.enqueue(str(runs))

    burst = workers.start(alias, "--burst")

    assert burst.wait_exit(30) == 0, burst.describe()
    assert result(enqueued.id).status == TaskResultStatus.SUCCESSFUL
    [line] = [line for line in burst.log().splitlines() if "failed with" in line]
    assert " later_django.worker WARNING job " in line, line
    assert (
        f"job {enqueued.id} (task {failure_tasks.fail_once_then_succeed.module_path}, "
        "queue default): attempt 1 of 2 failed with ValueError('first attempt'); next run at "
    ) in line


def test_a_later_worker_process_writes_a_failed_jobs_traceback_to_stderr(
    alias: str,
    workers,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """Without ``LOGGING`` and with ``DEBUG`` off (Django's console handler then shows
    nothing of ``django``), the worker still prints Django's failure line with the
    task's traceback."""
    enqueued = failure_tasks.fail_with_value_error.enqueue(str(tmp_path / "runs"), "no luck")

    burst = workers.start(alias, "--burst")

    assert burst.wait_exit(30) == 0, burst.describe()
    assert result(enqueued.id).status == TaskResultStatus.FAILED
    log = burst.log()
    assert f" {TASKS_LOGGER_NAME} ERROR Task id={enqueued.id} " in log, log
    assert "Traceback (most recent call last):" in log, log
    assert "raise ValueError(message)" in log and "ValueError: no luck" in log, log
