"""The human units of the operator's pages (pure functions, no database)."""

from __future__ import annotations

import pytest

from later_django.admin.units import NONE_TEXT, human_age, human_count, human_duration, human_rate

DAY = 24 * 60 * 60 * 1000


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, NONE_TEXT),
        (0, "0 ms"),
        (-5_000, "0 ms"),
        (850, "850 ms"),
        (999.4, "999 ms"),
        (999.6, "1 s"),  # rounds to a whole second: shown in seconds
        (1_000, "1 s"),
        (1_260, "1.3 s"),
        (9_940, "9.9 s"),
        (12_000, "12 s"),
        (59_400, "59 s"),
        (59_960, "1 min"),  # 59.96 s would print as "60 s"
        (210_000, "3.5 min"),
        (45 * 60_000, "45 min"),
        (7_560_000, "2.1 h"),
        (23 * 3_600_000, "23 h"),
        (3 * DAY, "3 d"),
        (400 * DAY, "400 d"),
    ],
)
def test_human_duration_picks_the_largest_unit_reaching_one(ms: float | None, text: str) -> None:
    assert human_duration(ms) == text


def test_human_age_counts_back_from_now_and_a_future_moment_is_zero() -> None:
    assert human_age(100_000, 10_000) == "1.5 min"
    assert human_age(100_000, 100_500) == "0 ms"
    assert human_age(100_000, None) == NONE_TEXT


def test_human_rate_names_count_and_window() -> None:
    assert human_rate(100, 60_000) == "100 / 1 min"
    assert human_rate(5, 1_500) == "5 / 1.5 s"
    assert human_rate(10, 3_600_000) == "10 / 1 h"
    assert human_rate(None, None) == NONE_TEXT
    assert human_rate(3, None) == NONE_TEXT


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0"),
        (999, "999"),
        (1000, "1k"),
        (1234, "1.2k"),
        (34_567, "35k"),
        (999_499, "999k"),
        (999_960, "1M"),
        (5_600_000, "5.6M"),
        (1_234_567_890, "1235M"),
    ],
)
def test_human_count_is_exact_below_a_thousand_then_in_k_and_m(count: int, text: str) -> None:
    assert human_count(count) == text
