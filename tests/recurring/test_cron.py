"""Cron, time zones, the definition codec and the catch-up rule: pure functions, no database."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from later_django.core.keys import parse_recurring_due_key, recurring_due_key, recurring_key_bounds
from later_django.engine.recurring import (
    RecurringDefinition,
    decode_definition,
    encode_definition,
    validate_recurring_id,
)
from later_django.engine.recurring_pass import MISFIRE_GRACE_MS, due_ticks
from later_django.engine.recurring_schedule import (
    cron_problem,
    last_tick_ms,
    next_tick_ms,
    validate_cron,
    validate_timezone,
)
from later_django.exceptions import RecordDecodeError


def ms(*parts: int, tz: str = "UTC") -> int:
    return round(datetime(*parts, tzinfo=ZoneInfo(tz)).timestamp() * 1000)


def definition(cron: str, next_run_ms: int, timezone: str = "UTC") -> RecurringDefinition:
    return RecurringDefinition(
        id="r1",
        cron=cron,
        task_path="tests.recurring.tasks.plain",
        args=[1],
        kwargs={},
        timezone=timezone,
        sequential=False,
        next_run_ms=next_run_ms,
    )


def test_six_fields_means_a_trailing_seconds_field() -> None:
    start = ms(2026, 1, 1, 12, 0, 0)
    assert next_tick_ms("* * * * * *", "UTC", start) == start + 1000
    assert next_tick_ms("* * * * * */10", "UTC", start + 1) == start + 10_000
    assert next_tick_ms("*/5 * * * *", "UTC", start) == start + 5 * 60_000


def test_next_tick_is_strictly_after_even_inside_a_second() -> None:
    tick = ms(2026, 1, 1, 12, 0, 7)
    assert next_tick_ms("* * * * * *", "UTC", tick) == tick + 1000
    assert next_tick_ms("* * * * * *", "UTC", tick - 1) == tick
    assert next_tick_ms("* * * * * *", "UTC", tick + 999) == tick + 1000


def test_last_tick_is_at_or_before() -> None:
    tick = ms(2026, 1, 1, 12, 0, 0)
    assert last_tick_ms("0 * * * *", "UTC", tick) == tick
    assert last_tick_ms("0 * * * *", "UTC", tick - 1) == tick - 3_600_000
    assert last_tick_ms("0 * * * *", "UTC", tick + 1_234_567) == tick


def test_time_zone_gives_local_wall_clock_ticks() -> None:
    after = ms(2026, 1, 10, 0, 0, 0)
    paris = next_tick_ms("0 3 * * *", "Europe/Paris", after)
    assert paris == ms(2026, 1, 10, 3, 0, 0, tz="Europe/Paris")
    assert paris == ms(2026, 1, 10, 2, 0, 0)  # UTC+1 in winter


def test_dst_spring_forward_runs_a_missing_local_time_once() -> None:
    # 2026-03-29: Paris clocks jump from 02:00 to 03:00; 02:30 does not exist.
    after = ms(2026, 3, 28, 12, 0, 0, tz="Europe/Paris")
    first = next_tick_ms("30 2 * * *", "Europe/Paris", after)
    second = next_tick_ms("30 2 * * *", "Europe/Paris", first)
    assert datetime.fromtimestamp(first / 1000, UTC) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert second == ms(2026, 3, 30, 2, 30, 0, tz="Europe/Paris")


def test_dst_summer_offset_applies_after_the_change() -> None:
    after = ms(2026, 3, 29, 12, 0, 0, tz="Europe/Paris")
    tick = next_tick_ms("0 3 * * *", "Europe/Paris", after)
    assert tick == ms(2026, 3, 30, 1, 0, 0)  # 03:00 at UTC+2


@pytest.mark.parametrize(
    "cron", ["* * * *", "61 * * * *", "bad", "", "0 0 30 2 *", "0 0 1 1 * 0 2020", None, 5]
)
def test_bad_cron_is_named(cron: object) -> None:
    problem = cron_problem(cron)
    assert problem is not None and repr(cron) in problem
    with pytest.raises(ValueError, match="nightly"):
        validate_cron(cron, "nightly")


@pytest.mark.parametrize("cron", ["0 3 * * *", "*/15 * * * *", "* * * * * */2", "0 0 L * *"])
def test_good_cron_passes(cron: str) -> None:
    assert cron_problem(cron) is None


@pytest.mark.parametrize("bad", ["", "a b", "x" * 201, "a/b", "é", None, 3])
def test_bad_ids_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="recurring id"):
        validate_recurring_id(bad)


def test_good_ids_and_their_keys_stay_inside_the_scan_range() -> None:
    start, stop = recurring_key_bounds("ns")
    for good in ["a", "report:nightly-2.v1", "_" * 200, "Z9"]:
        assert validate_recurring_id(good) == good
        key = f"ns-recurring-{good}"
        assert start <= key < stop


def test_timezone_validation() -> None:
    assert validate_timezone(None, "r") == "UTC"
    assert validate_timezone("Europe/Paris", "r") == "Europe/Paris"
    with pytest.raises(ValueError, match="Mars/Olympus"):
        validate_timezone("Mars/Olympus", "r")


def test_definition_codec_round_trips_and_refuses_garbage() -> None:
    original = definition("0 3 * * *", 123)
    original.last_run_ms = 100
    original.kwargs = {"x": [1, "two", None]}
    assert decode_definition(encode_definition(original)) == original
    with pytest.raises(RecordDecodeError):
        decode_definition(b"\xc1not msgpack")
    with pytest.raises(RecordDecodeError):
        decode_definition(b"\x81\xa1v\x63")  # {"v": 99}


def test_due_index_key_round_trips_ids_with_dashes() -> None:
    key = recurring_due_key("ns", 1_700_000_000_000, "a-b:c.d")
    assert parse_recurring_due_key("ns", key) == (1_700_000_000_000, "a-b:c.d")


def test_not_due_yields_nothing() -> None:
    now = ms(2026, 1, 1, 12, 0, 0)
    assert due_ticks(definition("* * * * * *", now + 1), now) == ([], now + 1)


def test_on_time_ticks_each_get_an_occurrence() -> None:
    now = ms(2026, 1, 1, 12, 0, 3) + 500
    first = ms(2026, 1, 1, 12, 0, 1)  # the pass is 2.5 s late: still on time
    ticks, next_run = due_ticks(definition("* * * * * *", first), now)
    assert ticks == [first, first + 1000, first + 2000]
    assert next_run == first + 3000


def test_downtime_gives_one_catch_up_not_one_per_missed_tick() -> None:
    now = ms(2026, 1, 1, 12, 30, 0)
    three_hours_late = ms(2026, 1, 1, 10, 0, 0)
    ticks, next_run = due_ticks(definition("0 * * * *", three_hours_late), now)
    assert ticks == [ms(2026, 1, 1, 12, 0, 0)]  # the latest missed tick, once
    assert next_run == ms(2026, 1, 1, 13, 0, 0)


def test_downtime_catch_up_plus_ticks_within_the_grace() -> None:
    now = ms(2026, 1, 1, 12, 0, 0)
    ticks, next_run = due_ticks(definition("* * * * * *", now - 3_600_000), now)
    grace_ticks = MISFIRE_GRACE_MS // 1000 + 1  # now-5s .. now, each on time
    assert len(ticks) == 1 + grace_ticks
    assert ticks[0] == now - MISFIRE_GRACE_MS - 1000  # one catch-up
    assert ticks[1:] == [now - MISFIRE_GRACE_MS + 1000 * i for i in range(grace_ticks)]
    assert next_run == now + 1000
