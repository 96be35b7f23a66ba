"""``later_django.compat.tasks``: one set of Tasks-framework names on Django 5.2 (the
django-tasks backport), 6.0 and 6.1. These run on whichever the environment has (every
corner of the matrix, docs/testing.md); each would fail on the corner whose difference
it covers if the compat module did not meet it."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from later_django.compat import tasks as compat
from later_django.tasks import LaterTask
from tests.engine import tasks
from tests.engine.support import result, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_the_framework_is_django_tasks_when_django_has_it_and_the_backport_otherwise() -> None:
    has_django_tasks = importlib.util.find_spec("django.tasks") is not None
    assert ("django.tasks" if has_django_tasks else "django_tasks") == compat.FRAMEWORK
    assert compat.Task.__module__ == f"{compat.FRAMEWORK}.base"
    assert compat.InvalidTask.__module__ == f"{compat.FRAMEWORK}.exceptions"
    assert (
        compat.task_finished is importlib.import_module(f"{compat.FRAMEWORK}.signals").task_finished
    )


def test_without_either_framework_the_import_error_names_the_extra_to_install() -> None:
    """Django 5.2 without the backport: neither ``django.tasks`` nor ``django_tasks``."""
    script = (
        "import sys; sys.modules['django.tasks'] = sys.modules['django_tasks'] = None\n"
        "import later_django.compat.tasks"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 1
    assert (
        "ImportError: later_django needs django.tasks (Django 6.0 or newer) or, on Django 5.2,"
        " the django-tasks backport: pip install 'later-django[django52]'"
    ) in done.stderr, done.stderr


def test_task_gives_later_options_to_the_backend_task_class() -> None:
    """Django 6.0's own ``@task`` raises TypeError for ``retry``."""
    assert isinstance(tasks.attempt_seen, LaterTask)
    assert tasks.attempt_seen.retry == {"max_retries": 1, "backoff": "immediate"}
    assert tasks.attempt_seen.takes_context


def test_task_refuses_run_after_and_unknown_options_naming_them() -> None:
    with pytest.raises(TypeError, match=r"run_after.*\.using\(run_after=\.\.\.\)"):
        compat.task(run_after=None)(tasks.append_line)
    with pytest.raises(TypeError, match="colour"):
        compat.task(colour="blue")(tasks.append_line)


def test_the_exceptions_are_the_ones_the_backend_raises(engine_db: str) -> None:
    with pytest.raises(compat.InvalidTask, match="Queue 'nowhere' is not valid"):
        tasks.add.using(queue_name="nowhere").enqueue(1, 2)
    with pytest.raises(compat.TaskResultDoesNotExist):
        result("01J0000000000000000000000Z")


def test_a_retried_job_reports_through_the_framework_logger(
    engine_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The framework's receivers log each start and finish on ``TASKS_LOGGER_NAME``
    (``django_tasks`` on the backport): connected without its app in INSTALLED_APPS."""
    caplog.set_level(logging.INFO, logger=compat.TASKS_LOGGER_NAME)
    enqueued = tasks.attempt_seen.enqueue(str(tmp_path / "attempts"))

    [found] = run_until_finished([enqueued.id])

    assert found.status == compat.TaskResultStatus.SUCCESSFUL
    assert (found.return_value, found.attempts) == (2, 2)
    assert len(found.worker_ids) == 2
    logged = [r.getMessage() for r in caplog.records if r.name == compat.TASKS_LOGGER_NAME]
    assert f"Task id={enqueued.id} path={tasks.attempt_seen.module_path} state=SUCCESSFUL" in {
        line.replace("TaskResultStatus.", "") for line in logged
    }, logged
