"""The scheduling pass: each due tick enqueued once, one catch-up after downtime."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from later_django.api import schedule_recurring
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.engine.recurring import RecurringDefinition
from later_django.engine.recurring_pass import MISFIRE_GRACE_MS, NEVER_MS, run_recurring_pass
from later_django.engine.recurring_schedule import last_tick_ms, next_tick_ms
from later_django.storage.stores import stores_for
from tests.engine.support import run_until_finished
from tests.recurring import tasks
from tests.recurring.support import (
    NAMESPACE,
    definition,
    job_records,
    move_next_run,
    occurrences,
    store,
)
from tests.worker.tasks import read_lines

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

HOUR_MS = 3_600_000


def recent_tick(seconds_ago: int = 2) -> int:
    """A whole second a little in the past: a tick of any per-second schedule that a
    pass at that moment finds due, whose occurrence is ready at once."""
    return (now_ms() // 1000 - seconds_ago) * 1000


def test_a_due_tick_is_enqueued_once_and_the_next_run_advances(recur_db: str) -> None:
    schedule_recurring("every-ten", "* * * * * */10", tasks.plain, 5)
    tick = (now_ms() // 10_000 - 1) * 10_000
    move_next_run(recur_db, "every-ten", tick)

    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick - 1) == 0
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick) == 1
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick) == 0
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick + 9_999) == 0

    [occurrence] = occurrences(recur_db, "every-ten")
    assert occurrence.stage == stages.ENQUEUED
    assert occurrence.task_path == "tests.recurring.tasks.plain"
    assert occurrence.args == [5]
    assert occurrence.run_after_ms == tick
    after = definition(recur_db, "every-ten")
    assert after.last_run_ms == tick
    assert after.next_run_ms == tick + 10_000
    assert after.last_job_id == occurrence.job_id


def test_the_occurrence_runs_and_knows_its_tick(recur_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "ticks")
    schedule_recurring("runs", "* * * * * *", tasks.record_tick, path, label="x")
    tick = move_next_run(recur_db, "runs", recent_tick()).next_run_ms
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick) == 1
    [occurrence] = occurrences(recur_db, "runs")

    run_until_finished([occurrence.job_id])

    # (the burst worker runs the recurring pass too, so later ticks may have run)
    [line] = [line for line in read_lines(path) if line["job_id"] == occurrence.job_id]
    assert line["tick"] == tick
    assert line["recurring_id"] == "runs" and line["job_id"] == occurrence.job_id


def test_a_slightly_late_pass_loses_no_tick(recur_db: str) -> None:
    schedule_recurring("per-second", "* * * * * *", tasks.plain, 1)
    first = move_next_run(recur_db, "per-second", recent_tick(5)).next_run_ms
    late = first + 3_000  # within MISFIRE_GRACE_MS
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, late) == 4
    ticks = [record.run_after_ms for record in occurrences(recur_db, "per-second")]
    assert sorted(ticks) == [first, first + 1000, first + 2000, first + 3000]
    assert definition(recur_db, "per-second").next_run_ms == first + 4000


def test_after_downtime_exactly_one_catch_up_runs(recur_db: str) -> None:
    schedule_recurring("hourly", "0 * * * *", tasks.plain, 1)
    # Half past an hour: within MISFIRE_GRACE_MS after a full hour that hour's tick is
    # a slightly late one, not a misfire, and runs as well (CI ran this at 20:00:03).
    now = last_tick_ms("0 * * * *", "UTC", now_ms()) - HOUR_MS // 2
    # The schedule was last advanced five hours ago; everything was down since.
    missed_first = last_tick_ms("0 * * * *", "UTC", now - 5 * HOUR_MS)
    move_next_run(recur_db, "hourly", missed_first)

    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, now) == 1
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, now) == 0

    [catch_up] = occurrences(recur_db, "hourly")
    assert catch_up.run_after_ms == last_tick_ms("0 * * * *", "UTC", now - MISFIRE_GRACE_MS - 1)
    assert definition(recur_db, "hourly").next_run_ms == next_tick_ms("0 * * * *", "UTC", now)


def test_a_task_that_no_longer_resolves_is_logged_skipped_and_kept(
    recur_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    now = now_ms()
    ghost = RecurringDefinition(
        id="ghost",
        cron="* * * * * *",
        task_path="tests.recurring.tasks.removed_long_ago",
        args=[],
        kwargs={},
        timezone="UTC",
        sequential=False,
        next_run_ms=now,
    )
    store(recur_db, ghost)
    healthy = schedule_recurring("healthy", "* * * * * *", tasks.plain, 1)

    with caplog.at_level(logging.ERROR, logger="later_django.recurring"):
        done = run_recurring_pass(stores_for(recur_db), NAMESPACE, max(now, healthy.next_run_ms))

    assert done == len(occurrences(recur_db, "healthy")) >= 1
    assert occurrences(recur_db, "ghost") == []
    kept = definition(recur_db, "ghost")
    assert kept is not None and "removed_long_ago" in kept.last_error
    assert kept.next_run_ms > max(now, healthy.next_run_ms)
    assert any("ghost" in message for message in caplog.messages)


def test_sequential_occurrences_go_to_the_reserved_topic(recur_db: str) -> None:
    schedule_recurring("seq", "* * * * * *", tasks.plain, 1, sequential=True)
    tick = move_next_run(recur_db, "seq", recent_tick()).next_run_ms
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick) == 1
    [occurrence] = occurrences(recur_db, "seq")
    assert occurrence.topic == "__later_recurring__"
    assert occurrence.partition_id is not None


def test_a_removed_definition_leaves_no_due_index_behind(recur_db: str) -> None:
    from later_django.api import remove_recurring

    made = schedule_recurring("short-lived", "* * * * * *", tasks.plain, 1)
    remove_recurring("short-lived")
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, made.next_run_ms + 10_000) == 0
    assert job_records(recur_db) == []
    assert stores_for(recur_db).kv.key_scan(f"{NAMESPACE}-recur", f"{NAMESPACE}-recus", 10) == []


def test_a_continuation_of_a_sequential_occurrence_joins_its_partition(recur_db: str) -> None:
    from later_django.api import continue_with

    schedule_recurring("seq-chain", "* * * * * *", tasks.plain, 1, sequential=True)
    tick = move_next_run(recur_db, "seq-chain", recent_tick()).next_run_ms
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick) == 1
    [occurrence] = occurrences(recur_db, "seq-chain")

    child = continue_with(occurrence.job_id, tasks.plain, 2)

    [child_record] = [record for record in job_records(recur_db) if record.job_id == child.id]
    assert child_record.topic == "__later_recurring__"
    assert child_record.partition_id == occurrence.partition_id
    assert child_record.sequence > occurrence.sequence


def test_listing_and_the_pass_page_through_many_definitions(
    recur_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from later_django.engine import recurring, recurring_pass

    monkeypatch.setattr(recurring, "_PAGE", 3)
    monkeypatch.setattr(recurring_pass, "BATCH", 3)
    tick = recent_tick()
    for number in range(8):
        schedule_recurring(f"many-{number}", "* * * * * *", tasks.plain, number)
        move_next_run(recur_db, f"many-{number}", tick)

    listed = recurring.list_recurring(stores=stores_for(recur_db), namespace=NAMESPACE)
    assert [found.id for found in listed] == [f"many-{number}" for number in range(8)]
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick) == 8
    assert sorted(record.recurring_id for record in job_records(recur_db)) == [
        f"many-{number}" for number in range(8)
    ]


def test_a_schedule_with_no_tick_left_stops_without_stopping_the_pass(recur_db: str) -> None:
    tick = recent_tick()
    store(
        recur_db,
        RecurringDefinition(
            id="year-2020-only",
            cron="0 0 1 1 * 0 2020",  # refused at registration; stored as by an old version
            task_path="tests.recurring.tasks.plain",
            args=[1],
            kwargs={},
            timezone="UTC",
            sequential=False,
            next_run_ms=tick,
        ),
    )
    schedule_recurring("alive", "* * * * * *", tasks.plain, 1)
    move_next_run(recur_db, "alive", tick)

    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick) == 1
    stopped = definition(recur_db, "year-2020-only")
    assert stopped.next_run_ms == NEVER_MS and "no tick left" in stopped.last_error
    assert [record.recurring_id for record in job_records(recur_db)] == ["alive"]
    assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick + 1000) == 1


def test_one_definition_failing_at_write_does_not_hold_back_its_page(
    recur_db: str, caplog: pytest.LogCaptureFixture
) -> None:
    from later_django.core.topics import RECURRING_TOPIC
    from later_django.engine.topics import register_topic

    # The reserved topic recorded with another layout: enqueueing to it raises
    # TopicLayoutMismatch inside the page's transaction.
    register_topic(stores_for(recur_db), NAMESPACE, RECURRING_TOPIC, 3)
    tick = recent_tick()
    for recurring_id, sequential in (("a-plain", False), ("b-seq", True), ("c-plain", False)):
        schedule_recurring(recurring_id, "* * * * * *", tasks.plain, 1, sequential=sequential)
        move_next_run(recur_db, recurring_id, tick)

    with caplog.at_level(logging.ERROR, logger="later_django.recurring"):
        assert run_recurring_pass(stores_for(recur_db), NAMESPACE, tick) == 2

    assert sorted(record.recurring_id for record in job_records(recur_db)) == ["a-plain", "c-plain"]
    assert definition(recur_db, "b-seq").next_run_ms == tick  # still due, retried next pass
    assert any("b-seq" in message for message in caplog.messages)
