"""``schedule_recurring`` / ``remove_recurring``: validation first, then one stored definition."""

from __future__ import annotations

import pytest
from django.db import transaction

from later_django.api import remove_recurring, schedule_recurring
from later_django.core.clock import now_ms
from later_django.engine.recurring import SOURCE_API, list_recurring
from later_django.engine.recurring_schedule import next_tick_ms
from later_django.storage.stores import stores_for
from tests.recurring import tasks
from tests.recurring.support import NAMESPACE, definition

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def stored_keys(alias: str) -> list[str]:
    """Every recurring key of the namespace: definitions and their index keys."""
    return stores_for(alias).kv.key_scan(f"{NAMESPACE}-recur", f"{NAMESPACE}-recus", 1000)


def test_schedule_stores_a_definition_with_its_next_run(recur_db: str) -> None:
    before = now_ms()
    made = schedule_recurring(
        "nightly", "0 3 * * *", tasks.plain, 7, timezone="Europe/Paris", sequential=True
    )
    stored = definition(recur_db, "nightly")
    assert stored == made
    assert stored.cron == "0 3 * * *"
    assert stored.task_path == "tests.recurring.tasks.plain"
    assert stored.args == [7] and stored.kwargs == {}
    assert stored.timezone == "Europe/Paris" and stored.sequential is True
    assert stored.source == SOURCE_API and stored.last_run_ms is None
    assert stored.next_run_ms in {
        next_tick_ms("0 3 * * *", "Europe/Paris", moment) for moment in (before, now_ms())
    }
    assert [
        found.id for found in list_recurring(stores=stores_for(recur_db), namespace=NAMESPACE)
    ] == ["nightly"]


def test_kwargs_are_stored_and_timezone_defaults_to_utc(recur_db: str) -> None:
    schedule_recurring("k", "*/5 * * * *", tasks.record_tick, "/tmp/x", label="five")
    stored = definition(recur_db, "k")
    assert stored.args == ["/tmp/x"] and stored.kwargs == {"label": "five"}
    assert stored.timezone == "UTC" and stored.sequential is False


def test_bad_cron_raises_naming_expression_and_id_and_writes_nothing(recur_db: str) -> None:
    with pytest.raises(ValueError) as raised:
        schedule_recurring("broken", "61 * * * *", tasks.plain, 1)
    assert "'61 * * * *'" in str(raised.value) and "'broken'" in str(raised.value)
    assert stored_keys(recur_db) == []


@pytest.mark.parametrize(
    ("recurring_id", "args", "options", "error", "named"),
    [
        ("bad id!", [1], {}, ValueError, "'bad id!'"),
        ("tz", [1], {"timezone": "Nowhere/City"}, ValueError, "Nowhere/City"),
        ("args", [object()], {}, TypeError, "object"),
        ("seq", [1], {"sequential": "yes"}, TypeError, "sequential"),
    ],
)
def test_invalid_input_raises_and_writes_nothing(
    recur_db: str, recurring_id, args, options, error, named
) -> None:
    with pytest.raises(error, match=named):
        schedule_recurring(recurring_id, "* * * * *", tasks.plain, *args, **options)
    assert stored_keys(recur_db) == []


def test_only_a_registered_task_is_accepted(recur_db: str) -> None:
    with pytest.raises(TypeError, match=r"not a django\.tasks\.Task"):
        schedule_recurring("plain", "* * * * *", tasks.plain.func, 1)
    assert stored_keys(recur_db) == []


def test_replacing_keeps_the_next_run_unless_the_schedule_changes(recur_db: str) -> None:
    first = schedule_recurring("r", "0 3 * * *", tasks.plain, 1)
    second = schedule_recurring("r", "0 3 * * *", tasks.plain, 2)
    assert second.args == [2] and second.next_run_ms == first.next_run_ms
    third = schedule_recurring("r", "30 4 * * *", tasks.plain, 2)
    assert third.next_run_ms == next_tick_ms("30 4 * * *", "UTC", third.updated_at_ms)
    assert len(list_recurring(stores=stores_for(recur_db), namespace=NAMESPACE)) == 1
    # one index key per definition, at its current next run
    index = stores_for(recur_db).kv.key_scan(f"{NAMESPACE}-recurdue-", f"{NAMESPACE}-recurdue.", 10)
    assert len(index) == 1 and index[0].endswith(f"{third.next_run_ms:015d}-r")


def test_remove_returns_whether_it_existed(recur_db: str) -> None:
    schedule_recurring("gone", "* * * * *", tasks.plain, 1)
    assert remove_recurring("gone") is True
    assert remove_recurring("gone") is False
    assert definition(recur_db, "gone") is None
    assert stored_keys(recur_db) == []


def test_both_join_the_callers_transaction(recur_db: str) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using=recur_db):
        schedule_recurring("rolled", "* * * * *", tasks.plain, 1)
        assert definition(recur_db, "rolled") is not None
        raise RuntimeError("roll back")
    assert stored_keys(recur_db) == []

    schedule_recurring("kept", "* * * * *", tasks.plain, 1)
    with pytest.raises(RuntimeError), transaction.atomic(using=recur_db):
        assert remove_recurring("kept") is True
        raise RuntimeError("roll back")
    assert definition(recur_db, "kept") is not None
