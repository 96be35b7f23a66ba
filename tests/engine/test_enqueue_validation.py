"""Enqueue refuses bad input with a message naming the value, and writes nothing."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from django.db import connections, transaction

from later_django.api import enqueue_many
from later_django.compat.tasks import InvalidTask, TaskResultStatus
from tests.engine import tasks
from tests.engine.support import no_rows, result, row_counts

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def bypassing_construction_checks(**changes: object):
    """A copy of ``tasks.add`` whose attributes skipped ``Task.__post_init__``, so
    the backend's own check at enqueue time is what refuses it."""
    bad = tasks.add.using()
    for name, value in changes.items():
        object.__setattr__(bad, name, value)
    return bad


def test_a_non_json_positional_argument_is_refused_naming_its_position(engine_db: str) -> None:
    with pytest.raises(TypeError) as raised:
        tasks.add.enqueue(1, Decimal("2.5"))
    message = str(raised.value)
    assert "args[1] is Decimal('2.5') of type decimal.Decimal" in message
    assert "not JSON serializable" in message
    assert "JSON-compatible" in message
    assert row_counts(engine_db) == no_rows()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_refused_as_not_json_in_args_and_kwargs(
    engine_db: str, bad: float
) -> None:
    with pytest.raises(TypeError) as raised:
        tasks.add.enqueue(1, bad)
    assert f"args[1] is {bad!r}, which is not JSON serializable" in str(raised.value)
    with pytest.raises(TypeError) as raised:
        tasks.add.enqueue(a=1, b={"scores": [0.5, bad]})
    assert f"kwargs['b']['scores'][1] is {bad!r}, which is not JSON serializable" in str(
        raised.value
    )
    assert row_counts(engine_db) == no_rows()


def test_a_non_json_keyword_argument_or_nested_value_is_refused_naming_where_it_sits(
    engine_db: str,
) -> None:
    with pytest.raises(TypeError) as raised:
        tasks.add.enqueue(a=1, b={"when": dt.date(2024, 1, 1)})
    assert "kwargs['b']['when']" in str(raised.value)
    with pytest.raises(TypeError) as raised:
        tasks.add.enqueue(1, {3: "int key"})
    assert "args[1]" in str(raised.value)
    assert "key 3" in str(raised.value)
    assert row_counts(engine_db) == no_rows()


def test_an_unstorable_argument_message_contains_djangos_unsupported_type_phrase(
    engine_db: str,
) -> None:
    """Django's own tests (and code written against them) look for "Unsupported type"
    in the message, from ``enqueue`` and ``aenqueue`` alike; a bad dict key says it too."""
    with pytest.raises(TypeError, match="Unsupported type") as raised:
        tasks.add.enqueue(1, dt.datetime.now())
    assert "args[1] is datetime.datetime(" in str(raised.value)
    with pytest.raises(TypeError, match="Unsupported type"):
        async_to_sync(tasks.add.aenqueue)(1, dt.datetime.now())
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.add.enqueue(1, {3: "int key"})
    assert row_counts(engine_db) == no_rows()


def test_enqueue_many_refuses_the_whole_batch_naming_the_bad_call(engine_db: str) -> None:
    calls = [((1, 2), {}), ((3, 4), {}), ((5, object()), {})]
    with pytest.raises(TypeError) as raised:
        enqueue_many(tasks.add, calls)
    assert "enqueue_many call 2" in str(raised.value)
    assert "args[1]" in str(raised.value)
    assert row_counts(engine_db) == no_rows()


def test_an_unknown_queue_is_refused(engine_db: str) -> None:
    with pytest.raises(InvalidTask, match="Queue 'nowhere' is not valid"):
        tasks.add.using(queue_name="nowhere")
    with pytest.raises(InvalidTask, match="Queue 'nowhere' is not valid"):
        bypassing_construction_checks(queue_name="nowhere").enqueue(1, 2)
    assert row_counts(engine_db) == no_rows()


@pytest.mark.parametrize("priority", [101, -101, 1.5])
def test_a_priority_out_of_range_or_not_whole_is_refused(engine_db: str, priority) -> None:
    with pytest.raises(InvalidTask, match="priority must be a whole number between -100 and 100"):
        tasks.add.using(priority=priority)
    with pytest.raises(InvalidTask, match="priority must be a whole number"):
        bypassing_construction_checks(priority=priority).enqueue(1, 2)
    assert row_counts(engine_db) == no_rows()


@pytest.mark.parametrize(("priority", "stored"), [(7.0, 7), (True, 1)])
def test_a_whole_number_priority_of_another_type_is_stored_as_that_integer(
    engine_db: str, priority, stored: int
) -> None:
    # Django's rule accepts any whole number (``int(p) == p``); the job must not
    # then fail inside the caller's transaction, breaking it and losing its data.
    with transaction.atomic(using=engine_db):
        first = tasks.add.enqueue(1, 2)
        second = tasks.add.using(priority=priority).enqueue(3, 4)
    assert result(first.id).status == TaskResultStatus.READY
    assert result(second.id).status == TaskResultStatus.READY
    with connections[engine_db].cursor() as cursor:
        cursor.execute("SELECT priority FROM later_delivery_queue ORDER BY sequence")
        assert [row[0] for row in cursor.fetchall()] == [0, stored]


def test_a_naive_run_after_is_refused(engine_db: str) -> None:
    naive = dt.datetime(2030, 1, 1, 12, 0)
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        tasks.add.using(run_after=naive)
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        bypassing_construction_checks(run_after=naive).enqueue(1, 2)
    assert row_counts(engine_db) == no_rows()


def test_a_fresh_backend_enqueues_a_task_whose_options_cannot_be_hashed(engine_db: str) -> None:
    """A task with a retry policy (a dict) cannot be hashed; describing its jobs must
    not need it to be, also as the very first task a new backend instance sees (a new
    process's first enqueue: a per-task cache once broke the quickstart here)."""
    from later_django.backend import LaterBackend

    backend = LaterBackend("default", {"QUEUES": ["default"]})
    with pytest.raises(TypeError):
        hash(tasks.fail_always)

    job = backend.new_job(tasks.fail_always, ("boom",), {})
    again = backend.new_jobs(tasks.fail_always, [(("a",), {}), (("b",), {})])

    assert job.args == ["boom"] and job.task_path == tasks.fail_always.module_path
    assert [each.args for each in again] == [["a"], ["b"]]
    hashable = backend.new_job(tasks.add, (1, 2), {})
    assert backend.new_job(tasks.add, (3, 4), {}).priority == hashable.priority
