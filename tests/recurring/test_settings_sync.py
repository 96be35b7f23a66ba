"""``LATER["RECURRING"]``: check later_django.E009 and the sync at worker start."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from later_django.api import schedule_recurring
from later_django.checks import check_later_settings
from later_django.conf import later_settings
from later_django.engine.recurring import SOURCE_API, SOURCE_SETTINGS, list_recurring
from later_django.engine.recurring_schedule import next_tick_ms
from later_django.engine.recurring_settings import sync_configured_recurring
from later_django.storage.stores import stores_for
from later_django.worker.runner import Worker, WorkerOptions
from tests.recurring import tasks
from tests.recurring.support import NAMESPACE, definition, move_next_run

NIGHTLY = {"cron": "0 3 * * *", "task": "tests.recurring.tasks.plain", "args": [1]}


def sync(alias: str, configured: dict) -> dict[str, int]:
    return sync_configured_recurring(
        stores=stores_for(alias), namespace=NAMESPACE, configured=configured
    )


@pytest.mark.parametrize(
    ("recurring", "named"),
    [
        ({"nightly": {**NIGHTLY, "cron": "0 25 * * *"}}, "'0 25 * * *'"),
        ({"bad id!": NIGHTLY}, "'bad id!'"),
        ({"nightly": {**NIGHTLY, "task": "not a path"}}, "'not a path'"),
        ({"nightly": {**NIGHTLY, "timezone": "Atlantis/Capital"}}, "Atlantis/Capital"),
        ({"nightly": {**NIGHTLY, "args": [object()]}}, "args"),
        ({"nightly": {**NIGHTLY, "sequential": "yes"}}, "sequential"),
        ({"nightly": {**NIGHTLY, "every": 5}}, "unknown keys ['every']"),
        ({"nightly": "0 3 * * *"}, "must be a dict"),
        (["nightly"], "must be a dict"),
    ],
)
def test_invalid_recurring_settings_are_reported_as_e009(recurring, named: str) -> None:
    with override_settings(LATER={"RECURRING": recurring}):
        found = [(message.id, message.msg) for message in check_later_settings()]
        assert any(id_ == "later_django.E009" and named in text for id_, text in found), found
        with pytest.raises(ImproperlyConfigured, match="RECURRING"):
            later_settings()


def test_valid_recurring_settings_pass_the_check() -> None:
    recurring = {
        "nightly": {**NIGHTLY, "sequential": True, "timezone": "Europe/Paris"},
        "tick": {"cron": "* * * * * */5", "task": "tests.recurring.tasks.plain"},
    }
    with override_settings(LATER={"RECURRING": recurring}):
        assert check_later_settings() == []


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_sync_creates_updates_and_removes_settings_definitions(recur_db: str) -> None:
    assert sync(recur_db, {"nightly": NIGHTLY, "hourly": {**NIGHTLY, "cron": "0 * * * *"}}) == {
        "written": 2,
        "unchanged": 0,
        "deleted": 0,
    }
    nightly = definition(recur_db, "nightly")
    assert nightly.source == SOURCE_SETTINGS and nightly.args == [1]
    assert nightly.next_run_ms == next_tick_ms("0 3 * * *", "UTC", nightly.created_at_ms)

    # Unchanged settings write nothing.
    assert sync(recur_db, {"nightly": NIGHTLY, "hourly": {**NIGHTLY, "cron": "0 * * * *"}}) == {
        "written": 0,
        "unchanged": 2,
        "deleted": 0,
    }
    # New args keep the next run (cron and time zone unchanged); hourly left settings.
    move_next_run(recur_db, "nightly", nightly.next_run_ms + 5)
    assert sync(recur_db, {"nightly": {**NIGHTLY, "args": [2]}}) == {
        "written": 1,
        "unchanged": 0,
        "deleted": 1,
    }
    updated = definition(recur_db, "nightly")
    assert updated.args == [2] and updated.next_run_ms == nightly.next_run_ms + 5
    assert definition(recur_db, "hourly") is None

    # A new time zone recomputes the next run.
    sync(recur_db, {"nightly": {**NIGHTLY, "timezone": "Asia/Tokyo"}})
    moved = definition(recur_db, "nightly")
    assert moved.next_run_ms == next_tick_ms("0 3 * * *", "Asia/Tokyo", moved.updated_at_ms)


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_sync_leaves_api_definitions_alone(recur_db: str) -> None:
    schedule_recurring("from-api", "*/5 * * * *", tasks.plain, 3)
    sync(recur_db, {"nightly": NIGHTLY})
    sync(recur_db, {})
    remaining = list_recurring(stores=stores_for(recur_db), namespace=NAMESPACE)
    assert [(found.id, found.source) for found in remaining] == [("from-api", SOURCE_API)]


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_a_worker_syncs_the_settings_when_it_starts(recur_db: str) -> None:
    later = {"NAMESPACE": NAMESPACE, "DATABASE": recur_db, "RECURRING": {"nightly": NIGHTLY}}
    with override_settings(LATER=later):
        assert Worker(WorkerOptions(queues=["default"], burst=True)).run() == 0
    assert definition(recur_db, "nightly").source == SOURCE_SETTINGS
    with override_settings(LATER={**later, "RECURRING": {}}):
        assert Worker(WorkerOptions(queues=["default"], burst=True)).run() == 0
    assert definition(recur_db, "nightly") is None
