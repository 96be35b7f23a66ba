"""Disabling, enabling and running a recurring job now (``disable_recurring``,
``enable_recurring``, ``run_recurring_now``): the due index follows the state, the
settings sync keeps it, and the recent occurrences are remembered."""

from __future__ import annotations

import pytest

from later_django.api import (
    disable_recurring,
    enable_recurring,
    run_recurring_now,
    schedule_recurring,
)
from later_django.core.clock import now_ms
from later_django.core.keys import recurring_due_key
from later_django.engine.recurring import RECENT_RUNS, decode_definition, encode_definition
from later_django.engine.recurring_pass import run_recurring_pass
from later_django.engine.recurring_schedule import next_tick_ms
from later_django.engine.recurring_settings import sync_configured_recurring
from later_django.storage.stores import stores_for
from tests.recurring import tasks
from tests.recurring.support import NAMESPACE, definition, move_next_run, occurrences

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

EVERY_MINUTE = "* * * * *"


def due_keys(alias: str) -> list[str]:
    return stores_for(alias).kv.key_scan(f"{NAMESPACE}-recurdue-", f"{NAMESPACE}-recurdue.", 100)


def test_a_disabled_definition_has_no_due_key_and_enqueues_nothing(recur_db: str) -> None:
    made = schedule_recurring("minutely", EVERY_MINUTE, tasks.plain, 1)
    assert disable_recurring("minutely") is True
    assert disable_recurring("minutely") is False
    stored = definition(recur_db, "minutely")
    assert stored is not None and stored.enabled is False
    assert due_keys(recur_db) == []
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, made.next_run_ms + 5 * 60_000) == 0
    assert occurrences(recur_db, "minutely") == []


def test_enabling_skips_the_ticks_missed_while_disabled(recur_db: str) -> None:
    schedule_recurring("minutely", EVERY_MINUTE, tasks.plain, 1)
    move_next_run(recur_db, "minutely", now_ms() - 10 * 60_000)  # ten minutes of ticks
    disable_recurring("minutely")
    before = now_ms()
    assert enable_recurring("minutely") is True
    assert enable_recurring("minutely") is False
    stored = definition(recur_db, "minutely")
    assert stored is not None and stored.enabled is True
    assert stored.next_run_ms in {
        next_tick_ms(EVERY_MINUTE, "UTC", moment) for moment in (before, now_ms())
    }
    assert due_keys(recur_db) == [recurring_due_key(NAMESPACE, stored.next_run_ms, "minutely")]
    # No catch-up of the missed ticks: nothing is due before the next tick.
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, stored.next_run_ms - 1) == 0
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, stored.next_run_ms) == 1


def test_an_unknown_id_raises_naming_it(recur_db: str) -> None:
    for call in (disable_recurring, enable_recurring, run_recurring_now):
        with pytest.raises(LookupError, match="'nothing-here'"):
            call("nothing-here")


def test_the_settings_sync_keeps_an_operators_disable(recur_db: str) -> None:
    configured = {"nightly": {"cron": "0 3 * * *", "task": "tests.recurring.tasks.plain"}}
    sync = dict(stores=stores_for(recur_db), namespace=NAMESPACE, configured=configured)
    sync_configured_recurring(**sync)
    disable_recurring("nightly")
    sync_configured_recurring(**{**sync, "configured": {"nightly": {**configured["nightly"]}}})
    changed = {"nightly": {**configured["nightly"], "args": [2]}}
    sync_configured_recurring(**{**sync, "configured": changed})
    stored = definition(recur_db, "nightly")
    assert stored is not None and stored.args == [2] and stored.enabled is False
    assert due_keys(recur_db) == []


def test_run_now_enqueues_one_occurrence_and_keeps_the_schedule(recur_db: str) -> None:
    made = schedule_recurring("minutely", EVERY_MINUTE, tasks.plain, 5)
    before = now_ms()
    job_id = run_recurring_now("minutely")
    (record,) = occurrences(recur_db, "minutely")
    assert record.job_id == job_id and record.args == [5]
    assert record.run_after_ms is not None and before <= record.run_after_ms <= now_ms()
    stored = definition(recur_db, "minutely")
    assert stored is not None
    assert stored.next_run_ms == made.next_run_ms and stored.last_run_ms is None
    assert stored.last_job_id == job_id and stored.recent_job_ids == [job_id]


def test_a_disabled_definition_still_runs_now(recur_db: str) -> None:
    schedule_recurring("minutely", EVERY_MINUTE, tasks.plain, 5)
    disable_recurring("minutely")
    job_id = run_recurring_now("minutely")
    assert [record.job_id for record in occurrences(recur_db, "minutely")] == [job_id]
    assert due_keys(recur_db) == []


def test_the_recent_runs_are_the_newest_few_ticks_and_runs_now(recur_db: str) -> None:
    made = schedule_recurring("minutely", EVERY_MINUTE, tasks.plain, 1)
    ran = [run_recurring_now("minutely") for _ in range(RECENT_RUNS - 2)]
    for minute in range(3):  # three ticks, each pass on time
        at = made.next_run_ms + minute * 60_000
        assert run_recurring_pass(stores_for(recur_db), NAMESPACE, at) == 1
    stored = definition(recur_db, "minutely")
    assert stored is not None
    ticks = [
        record.job_id for record in occurrences(recur_db, "minutely") if record.job_id not in ran
    ]
    assert len(ticks) == 3
    newest_first = [*reversed(ticks), *reversed(ran)]
    assert stored.recent_job_ids == newest_first[:RECENT_RUNS]
    assert stored.last_job_id == ticks[-1]


def test_a_definition_stored_before_the_new_fields_reads_as_enabled() -> None:
    """Definitions written by an older version have no ``on``/``rj`` fields."""
    import msgpack

    old = msgpack.unpackb(
        encode_definition(
            decode_definition(
                msgpack.packb(
                    {
                        "v": 1,
                        "id": "old",
                        "cron": EVERY_MINUTE,
                        "task": "tests.recurring.tasks.plain",
                        "args": [],
                        "kwargs": {},
                        "tz": "UTC",
                        "seq": False,
                        "next": 1,
                    }
                )
            )
        )
    )
    assert old["on"] is True and old["rj"] == []
