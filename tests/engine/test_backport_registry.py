"""Apps built on the django-tasks backport (``django_tasks``) on Django 6: one
``LaterBackend`` per alias whichever registry asks for it (``django.tasks``' or the
backport's), and a task declared through the backport's ``@task`` enqueued and run by
a worker, its ``LaterTask`` options included.

Where the backport is not installed these tests skip, saying why; with
``LATER_REQUIRE_BACKPORT`` set they fail instead, so CI can require them. On Django
5.2 the backport is the framework itself (one registry): nothing to compare.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from pathlib import Path
from types import ModuleType

import pytest

from later_django.backend import LaterBackend
from later_django.compat import tasks as compat
from later_django.compat.tasks import TaskResultStatus, task_backends
from later_django.tasks import LaterTask
from tests.engine.support import run_until_finished
from tests.engine.tasks import read_lines

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

REQUIRED = bool(os.environ.get("LATER_REQUIRE_BACKPORT"))


@pytest.fixture
def backport() -> ModuleType:
    """The ``django_tasks`` module, or a skip (a failure under LATER_REQUIRE_BACKPORT)."""
    if compat.FRAMEWORK != "django.tasks":
        pytest.skip("Django 5.2: the backport is the only task registry")
    if importlib.util.find_spec("django_tasks") is None:
        why = "the django-tasks backport (import name django_tasks) is not installed"
        if REQUIRED:
            pytest.fail(f"LATER_REQUIRE_BACKPORT is set but {why}: pip install django-tasks")
        pytest.skip(f"{why}; pip install django-tasks (LATER_REQUIRE_BACKPORT=1 makes this fail)")
    return importlib.import_module("django_tasks")


def test_both_registries_give_the_one_backend_of_an_alias(backport: ModuleType) -> None:
    ours = task_backends["default"]
    assert isinstance(ours, LaterBackend)
    assert backport.task_backends["default"] is ours
    assert backport.default_task_backend.alias == "default"
    assert backport.task_backends.all() == [ours]


def test_every_thread_gets_the_same_backend_from_django_tasks() -> None:
    """``task_backends`` keeps one backend per thread; each is the process's instance."""
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(task_backends["default"]))
    thread.start()
    thread.join()
    assert seen == [task_backends["default"]] and seen[0] is task_backends["default"]


def test_other_params_make_another_backend() -> None:
    """An overridden ``TASKS`` (other params) is not answered with the old instance."""
    default = task_backends["default"]
    other = LaterBackend("default", {"BACKEND": "later_django.backend.LaterBackend"})
    assert other is not default
    assert other.queues == {"default"} and default.queues == {"default", "emails", "reports"}
    again = LaterBackend("default", {"BACKEND": "later_django.backend.LaterBackend"})
    assert again is other


def test_a_task_declared_through_the_backport_is_enqueued_and_run_by_a_worker(
    backport: ModuleType, engine_db: str
) -> None:
    backport_tasks = importlib.import_module("tests.engine.backport_tasks")
    double = backport_tasks.double
    assert isinstance(double, LaterTask)
    assert double.get_backend() is backport.task_backends["default"] is task_backends["default"]

    enqueued = double.enqueue(21)
    [finished] = run_until_finished([enqueued.id])

    assert finished.status == TaskResultStatus.SUCCESSFUL and finished.return_value == 42
    assert backport.default_task_backend.get_result(enqueued.id).return_value == 42


def test_a_backport_tasks_retry_option_gives_up_on_a_deleted_object(
    backport: ModuleType, engine_db: str, tmp_path: Path
) -> None:
    backport_tasks = importlib.import_module("tests.engine.backport_tasks")
    runs = tmp_path / "runs"

    enqueued = backport_tasks.index_deleted_object.enqueue(str(runs))
    [failed] = run_until_finished([enqueued.id])

    assert failed.status == TaskResultStatus.FAILED
    assert read_lines(runs) == ["ran"], "given up at once, with 3 retries left"
