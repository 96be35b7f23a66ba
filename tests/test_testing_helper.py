"""``later_django.testing``: ``run_jobs()`` and the ``later_jobs`` fixture, on both databases,
inside pytest-django's rolled-back transaction (``django_db``) and with committed writes
(``django_db(transaction=True)``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections
from django.test import override_settings

from later_django.api import continue_with, enqueue_many, enqueue_to_partition
from later_django.compat.tasks import TaskResultStatus, default_task_backend, task, task_finished
from later_django.conf import later_settings
from later_django.engine import metrics
from later_django.testing import run_jobs
from later_django.testing.pytest_plugin import LaterJobs, later_jobs  # noqa: F401 (a fixture)

TOPIC = "helper-orders"
ROLLED_BACK = pytest.mark.django_db(databases="__all__")
COMMITTED = pytest.mark.django_db(transaction=True, databases="__all__")
MODES = [
    pytest.param("rolled_back", marks=ROLLED_BACK, id="rolled_back"),
    pytest.param("committed", marks=COMMITTED, id="committed"),
]

#: (thread id, whether the database connection was inside an atomic block) per call.
calls_seen: list[tuple[int, bool]] = []
#: One entry per attempt of ``fails_then_succeeds``.
attempts_seen: list[int] = []
#: (key, n) in the order the partitioned task ran.
order_seen: list[tuple[str, int]] = []


class Boom(Exception):
    """The failure of the failing tasks here."""


@task
def add(a: int, b: int) -> int:
    connection = connections[later_settings().database]
    calls_seen.append((threading.get_ident(), connection.in_atomic_block))
    return a + b


@task(queue_name="emails")
def shout(word: str) -> str:
    return word.upper()


@task
def countdown(n: int) -> int:
    """Enqueues itself with ``n - 1`` until 0; with a negative ``n``, forever."""
    if n != 0:
        countdown.enqueue(n - 1)
    return n


@task(retry={"max_retries": 2, "backoff": "fixed", "initial": 60})
def fails_then_succeeds() -> str:
    """Fails on its first attempt, succeeds on the next."""
    attempts_seen.append(len(attempts_seen) + 1)
    if len(attempts_seen) < 2:
        raise Boom("the first attempt fails")
    return "second time lucky"


@task(retry={"max_retries": 1, "backoff": "immediate"})
def fails_once_retried_at_once() -> int:
    attempts_seen.append(len(attempts_seen) + 1)
    if len(attempts_seen) < 2:
        raise Boom("the first attempt fails")
    return len(attempts_seen)


@task(retry={"max_retries": 0})
def always_fails() -> None:
    raise Boom("no luck")


@task
def in_order(key: str, n: int) -> int:
    order_seen.append((key, n))
    return n


@pytest.fixture
def later(db_alias: str) -> Iterator[str]:
    """``LATER`` on this case's database, with one partitioned topic; fresh call logs."""
    metrics.accumulator.take()
    calls_seen.clear()
    attempts_seen.clear()
    order_seen.clear()
    settings = {"NAMESPACE": "default", "DATABASE": db_alias, "TOPICS": {TOPIC: {"partitions": 2}}}
    with override_settings(LATER=settings):
        yield db_alias
    metrics.accumulator.take()


@pytest.mark.parametrize("mode", MODES)
def test_run_jobs_runs_the_queued_jobs_here_and_returns_their_results(
    later: str, mode: str
) -> None:
    first, second = add.enqueue(2, 3), shout.enqueue("hi")

    results = run_jobs()

    assert [(r.id, r.status) for r in results] == [
        (first.id, TaskResultStatus.SUCCESSFUL),
        (second.id, TaskResultStatus.SUCCESSFUL),
    ]
    assert [r.return_value for r in results] == [5, "HI"]
    # The calling thread, on its connection: inside the test's transaction when it has one
    # (on PostgreSQL no other connection could even see the uncommitted job).
    in_transaction = mode == "rolled_back"
    assert calls_seen == [(threading.get_ident(), in_transaction)]
    assert default_task_backend.get_result(first.id).status == TaskResultStatus.SUCCESSFUL
    assert run_jobs() == []


@pytest.mark.parametrize("mode", MODES)
def test_queue_and_task_options_run_only_those_jobs_and_leave_the_rest_queued(
    later: str, mode: str
) -> None:
    summed, shouted, counted = add.enqueue(1, 1), shout.enqueue("a"), countdown.enqueue(0)

    assert [r.id for r in run_jobs(queue="emails")] == [shouted.id]
    assert [r.id for r in run_jobs(task=countdown)] == [counted.id]
    assert default_task_backend.get_result(summed.id).status == TaskResultStatus.READY
    assert run_jobs(task="tests.test_testing_helper.shout") == []
    # The jobs skipped on the way were handed back: the next run takes them.
    assert [r.id for r in run_jobs(queue=["default"])] == [summed.id]


@pytest.mark.parametrize("mode", MODES)
def test_max_jobs_bounds_a_task_that_enqueues_itself(later: str, mode: str) -> None:
    countdown.enqueue(-1)

    results = run_jobs(max_jobs=5)

    assert [r.return_value for r in results] == [-1, -2, -3, -4, -5]
    assert [r.return_value for r in run_jobs(max_jobs=1)] == [-6]


@pytest.mark.parametrize("mode", MODES)
def test_jobs_a_run_makes_ready_run_in_the_same_run(later: str, mode: str) -> None:
    countdown.enqueue(2)
    parent = add.enqueue(1, 2)
    child = continue_with(parent, shout, "after")

    results = run_jobs()

    assert [r.return_value for r in results] == [2, 3, 1, "AFTER", 0]
    assert results[3].id == child.id


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_due_at_once_runs_in_the_same_run(later: str, mode: str) -> None:
    job = fails_once_retried_at_once.enqueue()

    [result] = run_jobs()

    assert (result.id, result.status, result.return_value) == (job.id, "SUCCESSFUL", 2)
    assert result.attempts == 2


@pytest.mark.parametrize("mode", MODES)
def test_delayed_jobs_run_only_when_due_by_now_or_with_include_delayed(
    later: str, mode: str
) -> None:
    in_an_hour = datetime.now(UTC) + timedelta(hours=1)
    later_job = add.using(run_after=in_an_hour).enqueue(20, 1)
    tomorrow = add.using(run_after=in_an_hour + timedelta(days=1)).enqueue(40, 2)

    assert run_jobs() == []
    assert [r.id for r in run_jobs(now=in_an_hour + timedelta(minutes=1))] == [later_job.id]
    assert [r.return_value for r in run_jobs(include_delayed=True)] == [42]
    assert default_task_backend.get_result(tomorrow.id).status == TaskResultStatus.SUCCESSFUL


@pytest.mark.parametrize("mode", MODES)
def test_retries_and_failures_are_written_as_a_worker_writes_them(later: str, mode: str) -> None:
    finished: list[tuple[str, TaskResultStatus]] = []

    def on_finished(sender, task_result, **kwargs):  # type: ignore[no-untyped-def]
        finished.append((task_result.id, task_result.status))

    task_finished.connect(on_finished)
    try:
        retried = fails_then_succeeds.enqueue()
        failed = always_fails.enqueue()
        [waiting, done] = run_jobs()
        assert (waiting.id, waiting.status, len(waiting.errors)) == (
            retried.id,
            TaskResultStatus.READY,  # requeued: its retry is due in 60 s
            1,
        )
        assert (done.id, done.status) == (failed.id, TaskResultStatus.FAILED)
        assert "tests.test_testing_helper.Boom: no luck" in done.errors[0].traceback
        [succeeded] = run_jobs(include_delayed=True)
    finally:
        task_finished.disconnect(on_finished)

    assert (succeeded.status, succeeded.return_value) == (
        TaskResultStatus.SUCCESSFUL,
        "second time lucky",
    )
    assert succeeded.attempts == 2
    assert [e.exception_class_path for e in succeeded.errors] == ["tests.test_testing_helper.Boom"]
    assert finished == [(failed.id, TaskResultStatus.FAILED), (retried.id, "SUCCESSFUL")]


@pytest.mark.parametrize("mode", MODES)
def test_partitioned_jobs_run_in_their_key_order(later: str, mode: str) -> None:
    for n in range(3):
        enqueue_to_partition(TOPIC, "ada", in_order, "ada", n)
        enqueue_to_partition(TOPIC, "ken", in_order, "ken", n)
    enqueue_many(shout, [(("x",), {}), (("y",), {})])

    # The heads of other queues and tasks are left alone, then run by a plain run.
    assert [r.return_value for r in run_jobs(queue="emails")] == ["X", "Y"]
    assert run_jobs(task=shout) == []
    assert order_seen == []
    results = run_jobs(task="tests.test_testing_helper.in_order", max_jobs=2)
    results += run_jobs()

    assert len(results) == 6
    assert all(r.status == TaskResultStatus.SUCCESSFUL for r in results)
    assert [n for key, n in order_seen if key == "ada"] == [0, 1, 2]
    assert [n for key, n in order_seen if key == "ken"] == [0, 1, 2]
    assert run_jobs(include_delayed=True) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_jobs": 0}, r"max_jobs=\.\.\.\) must be an integer >= 1, got 0"),
        ({"max_jobs": True}, r"must be an integer >= 1, got True"),
        ({"queue": ""}, r"queue=\.\.\.\) takes queue names \(non-empty strings\), got ''"),
        ({"queue": []}, r"got no queue name"),
        ({"task": 42}, r"takes a django.tasks.Task or its dotted path, got 42"),
        ({"now": datetime(2030, 1, 1)}, r"now=\.\.\.\) must be an aware datetime, got datetime"),
        ({"now": datetime.now(UTC), "include_delayed": True}, r"not both"),
    ],
)
def test_bad_options_are_refused_naming_the_value_and_the_rule(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        run_jobs(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
def test_the_later_jobs_fixture_runs_jobs_and_keeps_every_result(
    later: str,
    mode: str,
    later_jobs: LaterJobs,  # noqa: F811 (the imported fixture)
) -> None:
    add.enqueue(1, 2)
    [first] = later_jobs.run()
    shout.enqueue("b")
    [second] = later_jobs.run(queue="emails")

    assert later_jobs.results == [first, second]
    assert [r.return_value for r in later_jobs.results] == [3, "B"]
