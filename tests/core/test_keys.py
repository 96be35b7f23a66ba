"""core.keys: the one spelling of every ``<ns>-…`` key, and the orders it promises."""

from __future__ import annotations

import pytest

from later_django.core import keys


def test_every_key_of_a_namespace_starts_with_the_namespace_and_a_dash() -> None:
    made = [
        keys.job_key("ns", "J"),
        keys.children_key("ns", "J"),
        keys.undecodable_key("ns", "J"),
        keys.due_key("ns", 5, "J"),
        keys.recurring_key("ns", "R"),
        keys.recurring_due_key("ns", 5, "R"),
        keys.pass_lease_key("ns", "promote"),
    ]
    assert all(key.startswith("ns-") for key in made), made
    assert len(set(made)) == len(made)


def test_a_job_key_starts_with_the_job_key_prefix_followed_by_the_id() -> None:
    assert keys.job_key("ns", "01ABC") == keys.job_key_prefix("ns") + "01ABC"
    assert keys.children_key("ns", "01ABC").startswith(keys.job_key("ns", "01ABC"))


@pytest.mark.parametrize(
    ("make", "bounds"),
    [
        (lambda at: keys.due_key("ns", at, "J"), lambda now: keys.due_scan_bounds("ns", now)),
        (
            lambda at: keys.recurring_due_key("ns", at, "R"),
            lambda now: keys.recurring_due_bounds("ns", now),
        ),
    ],
    ids=["jobs", "recurring"],
)
def test_schedule_keys_sort_by_time_and_the_bounds_hold_exactly_the_due_ones(
    make,
    bounds,  # type: ignore[no-untyped-def]
) -> None:
    times = [0, 9, 10, 99, 1_700_000_000_000, 10**keys.DUE_DIGITS - 2]
    assert sorted(make(at) for at in times) == [make(at) for at in sorted(times)]
    now = 1_700_000_000_000
    start, stop = bounds(now)
    due = [at for at in times if start <= make(at) < stop]
    assert due == [at for at in times if at <= now]


def test_the_due_key_parts_come_back_out() -> None:
    assert keys.job_id_of_due_key(keys.due_key("ns", 42, "01JOB")) == "01JOB"
    key = keys.recurring_due_key("ns", 1_700_000_000_000, "nightly-report")
    assert keys.parse_recurring_due_key("ns", key) == (1_700_000_000_000, "nightly-report")


def test_recurring_key_bounds_hold_every_definition_and_nothing_else() -> None:
    start, stop = keys.recurring_key_bounds("ns")
    assert start <= keys.recurring_key("ns", "a") < stop
    assert start <= keys.recurring_key("ns", "zzz.9") < stop
    assert not start <= keys.recurring_due_key("ns", 1, "a") < stop
    assert not start <= keys.job_key("ns", "a") < stop


def test_reserved_names_are_those_with_the_reserved_prefix() -> None:
    assert keys.is_reserved("__later_recurring__")
    assert not keys.is_reserved("default")
    assert not keys.is_reserved("_later")
