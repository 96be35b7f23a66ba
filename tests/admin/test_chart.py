"""The dashboard's chart pieces as pure functions: slots of a range, folds, ticks and
the SVG (no database)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from later_django.admin.chart import (
    BOTTOM,
    HEIGHT,
    MAX_POINTS,
    TOP,
    Series,
    Window,
    build_chart,
    chart_svg,
    chart_window,
    count_label,
    fill_counts,
    fold_max,
    time_ticks,
    value_ticks,
)
from later_django.core.clock import MINUTE_MS

#: 2026-11-30 14:07:30 UTC.
NOW = int(datetime(2026, 11, 30, 14, 7, 30, tzinfo=UTC).timestamp() * 1000)


def at(hour: int, minute: int, day: int = 30) -> int:
    return int(datetime(2026, 11, day, hour, minute, tzinfo=UTC).timestamp() * 1000)


def points_of(svg: str) -> list[list[tuple[float, float]]]:
    """Every polyline's points, as numbers."""
    return [
        [tuple(float(n) for n in pair.split(",")) for pair in found.split()]
        for found in re.findall(r'<polyline [^>]*points="([^"]*)"', svg)
    ]


# --- slots of a range ---


@pytest.mark.parametrize(
    ("range_name", "slot_minutes", "slots"), [("hour", 1, 60), ("day", 10, 144), ("week", 60, 168)]
)
def test_each_range_has_fixed_slots_ending_with_the_current_minute(
    range_name: str, slot_minutes: int, slots: int
) -> None:
    window = chart_window(range_name, NOW)
    assert (window.slot_minutes, window.slots) == (slot_minutes, slots)
    assert window.slots <= MAX_POINTS == 168
    assert window.index_of(NOW) == slots - 1
    assert window.end_ms - window.start_ms == slots * slot_minutes * MINUTE_MS
    assert window.start_ms % (slot_minutes * MINUTE_MS) == 0, "aligned to UTC slots"
    assert window.last_bucket - window.first_bucket + 1 == slots * slot_minutes
    assert window.index_of(window.start_ms - 1) is None
    assert window.index_of(window.end_ms) is None


def test_the_hour_window_is_the_current_minute_and_the_59_before() -> None:
    window = chart_window("hour", NOW)
    assert window.start_ms == at(13, 8)
    assert window.end_ms == at(14, 8)


def test_an_unknown_range_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown chart range 'year'"):
        chart_window("year", NOW)


def test_fold_max_keeps_the_highest_reading_per_slot_and_gaps_where_none() -> None:
    window = Window("day", 10, at(14, 0) // (10 * MINUTE_MS), 3)
    readings = [(at(14, 1), 5), (at(14, 9), 9), (at(14, 5), 2), (at(14, 25), 0), (at(15, 0), 99)]
    assert fold_max(readings, window) == [9, None, 0]


def test_fill_counts_puts_slot_sums_in_place_and_zero_elsewhere() -> None:
    window = Window("day", 10, 1000, 4)
    assert fill_counts([(1001, 7), (1003, 2), (999, 50), (1004, 50)], window) == [0, 7, 0, 2]


# --- ticks ---


@pytest.mark.parametrize(
    ("peak", "ticks"),
    [
        (0, [0, 1]),
        (1, [0, 1]),
        (3, [0, 1, 2, 3]),
        (7, [0, 2, 4, 6, 8]),
        (40, [0, 10, 20, 30, 40]),
        (41, [0, 10, 20, 30, 40, 50]),
        (50, [0, 10, 20, 30, 40, 50]),
        (1000, [0, 200, 400, 600, 800, 1000]),
        (1001, [0, 500, 1000, 1500]),
    ],
)
def test_value_ticks_are_nice_steps_from_zero_to_the_peak(peak: int, ticks: list[int]) -> None:
    assert value_ticks(peak) == ticks


@pytest.mark.parametrize(
    ("value", "label"), [(0, "0"), (999, "999"), (1000, "1k"), (1500, "1.5k"), (2_000_000, "2M")]
)
def test_value_labels_are_compact(value: int, label: str) -> None:
    assert count_label(value) == label


def test_time_ticks_of_an_hour_are_every_ten_minutes_in_utc() -> None:
    ticks = time_ticks(at(13, 8), at(14, 8))
    assert [label for _, label in ticks] == ["13:10", "13:20", "13:30", "13:40", "13:50", "14:00"]
    assert ticks[0][0] == at(13, 10)


def test_time_ticks_of_a_day_are_every_three_hours_with_the_date_at_midnight() -> None:
    window = chart_window("day", NOW)
    labels = [label for _, label in time_ticks(window.start_ms, window.end_ms)]
    assert labels == ["15:00", "18:00", "21:00", "Nov 30", "03:00", "06:00", "09:00", "12:00"]


def test_time_ticks_of_a_week_are_days() -> None:
    window = chart_window("week", NOW)
    labels = [label for _, label in time_ticks(window.start_ms, window.end_ms)]
    assert labels == ["Nov 24", "Nov 25", "Nov 26", "Nov 27", "Nov 28", "Nov 29", "Nov 30"]


# --- the chart ---


def test_an_empty_chart_has_axes_and_says_it_has_no_readings() -> None:
    window = chart_window("hour", NOW)
    chart = build_chart("Queue length", "jobs", window, [Series("q", "c", (None,) * 60)])
    assert chart.peak == 0 and chart.filled_slots == 0
    assert [tick.label for tick in chart.y_ticks] == ["0", "1"]
    svg = chart_svg(chart)
    assert points_of(svg) == [] and "<circle" not in svg
    assert "no readings" in svg
    assert ">13:10</text>" in svg and ">jobs</text>" in svg


def test_a_single_reading_is_a_dot() -> None:
    window = chart_window("hour", NOW)
    values = (None,) * 30 + (4,) + (None,) * 29
    chart = build_chart("Queue length", "jobs", window, [Series("q", "later-q", values)])
    (line,) = chart.lines
    assert line.runs == () and len(line.dots) == 1
    svg = chart_svg(chart)
    assert points_of(svg) == []
    assert len(re.findall(r'<circle class="later-chart-dot later-q"', svg)) == 1
    assert "no readings" not in svg
    assert chart.top_value == 4


def test_a_gap_splits_a_line_into_runs() -> None:
    window = chart_window("hour", NOW)
    values = (1, 2, None, 3, 4, 5) + (None,) * 54
    svg = chart_svg(build_chart("t", "u", window, [Series("q", "c", values)]))
    assert [len(run) for run in points_of(svg)] == [2, 3]


def test_a_spike_reaches_the_top_of_the_plot_and_the_rest_lies_on_zero() -> None:
    window = chart_window("hour", NOW)
    values = [0] * 60
    values[42] = 1000
    chart = build_chart("Jobs finished", "jobs / min", window, [Series("ok", "c", tuple(values))])
    assert chart.peak == 1000
    assert [tick.label for tick in chart.y_ticks] == ["0", "200", "400", "600", "800", "1k"]
    (line,) = points_of(chart_svg(chart))
    assert len(line) == 60
    ys = [y for _, y in line]
    bottom = HEIGHT - BOTTOM
    assert ys[42] == TOP, "the spike touches the top tick"
    assert all(y == bottom for index, y in enumerate(ys) if index != 42)
    xs = [x for x, _ in line]
    assert xs == sorted(xs) and len(set(xs)) == 60


def test_the_svg_has_a_title_a_unit_and_escapes_its_texts() -> None:
    window = chart_window("week", NOW)
    chart = build_chart("<b>Jobs</b>", "jobs & more", window, [Series("ok", "c", (0,) * 168)])
    svg = chart_svg(chart)
    assert svg.startswith('<svg class="later-chart"') and svg.endswith("</svg>")
    assert "<title>&lt;b&gt;Jobs&lt;/b&gt;, last week</title>" in svg
    assert ">jobs &amp; more</text>" in svg
    assert "<b>" not in svg and "<script" not in svg
    assert "times UTC" in svg
    assert ">Nov 24</text>" in svg


def test_series_must_have_one_value_per_slot() -> None:
    with pytest.raises(ValueError, match="3 values for 60 slots"):
        build_chart("t", "u", chart_window("hour", NOW), [Series("q", "c", (1, 2, 3))])
