"""The dashboard's charts as server-rendered SVG: no JavaScript, no external asset.

Everything here is pure (numbers in, text out), so it is tested without a database:

* :func:`chart_window` places a range (``hour``, ``day``, ``week``) on fixed slots of
  :data:`SLOT_MINUTES` (1, 10 or 60 minutes, aligned to UTC), so a line has at most
  :data:`MAX_POINTS` (168) points whatever the range;
* :func:`fold_max` puts readings of a gauge (queue length) into those slots (the
  highest reading of each; a slot without one is a gap), :func:`fill_counts` puts
  counts already summed per slot (throughput) into them (a slot without one is 0);
* :func:`build_chart` computes the axes: value ticks on "nice" steps (1, 2 or 5 times a power of 10)
  from 0 to at least the peak, time ticks on whole UTC minutes, hours or days
  (labels ``14:10``, ``Dec 3``), and one polyline per run of readings;
* :func:`chart_svg` writes the ``<svg>`` (title, unit, grid, axes, lines).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from later_django.core import clock
from later_django.overview.history import HISTORY_RANGES

#: Minutes per slot of each range: 60 points an hour, 144 a day, 168 a week.
SLOT_MINUTES: dict[str, int] = {"hour": 1, "day": 10, "week": 60}
#: The most points a line of any range has.
MAX_POINTS = max(HISTORY_RANGES[name] // SLOT_MINUTES[name] for name in HISTORY_RANGES)

WIDTH = 600
HEIGHT = 220
#: The plot area's margins: room for value labels and the unit on the left, the
#: title above, the time labels below.
LEFT, RIGHT, TOP, BOTTOM = 56, 14, 28, 26
#: At most this many value intervals and time ticks.
VALUE_INTERVALS = 5
TIME_TICKS = 8
#: Tick spacings of the time axis, in minutes.
TIME_STEPS_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080)
DAY_MS = 24 * 60 * clock.MINUTE_MS


# --- the slots of a range ---


@dataclass(frozen=True)
class Window:
    """``slots`` consecutive slots of ``slot_minutes`` each, the first one numbered
    ``first_slot`` (slot number = minute bucket // ``slot_minutes``); the last one
    holds the current minute."""

    range_name: str
    slot_minutes: int
    first_slot: int
    slots: int

    @property
    def slot_ms(self) -> int:
        return self.slot_minutes * clock.MINUTE_MS

    @property
    def start_ms(self) -> int:
        return self.first_slot * self.slot_ms

    @property
    def end_ms(self) -> int:
        """Where the last slot ends (exclusive)."""
        return (self.first_slot + self.slots) * self.slot_ms

    @property
    def first_bucket(self) -> int:
        """The first minute bucket of the window."""
        return self.first_slot * self.slot_minutes

    @property
    def last_bucket(self) -> int:
        """The last minute bucket of the window (inclusive)."""
        return (self.first_slot + self.slots) * self.slot_minutes - 1

    def index_of(self, at_ms: int) -> int | None:
        """The slot (0 … ``slots - 1``) holding ``at_ms``, or ``None`` outside the window."""
        if at_ms < self.start_ms or at_ms >= self.end_ms:
            return None
        return (at_ms - self.start_ms) // self.slot_ms


def chart_window(range_name: str, now_ms: int) -> Window:
    """The slots of ``range_name`` ending with the one holding ``now_ms``;
    ``ValueError`` for a range that is not one of ``HISTORY_RANGES``."""
    if range_name not in HISTORY_RANGES:
        raise ValueError(f"unknown chart range {range_name!r}; use one of {list(HISTORY_RANGES)}")
    slot_minutes = SLOT_MINUTES[range_name]
    slots = HISTORY_RANGES[range_name] // slot_minutes
    last_slot = clock.minute_bucket(now_ms) // slot_minutes
    return Window(range_name, slot_minutes, last_slot - slots + 1, slots)


def fold_max(readings: Iterable[tuple[int, int]], window: Window) -> list[int | None]:
    """``(at_ms, value)`` readings of a gauge as one value per slot: the highest
    reading in the slot, ``None`` where there is none; readings outside are dropped."""
    values: list[int | None] = [None] * window.slots
    for at_ms, value in readings:
        index = window.index_of(at_ms)
        if index is not None:
            seen = values[index]
            values[index] = value if seen is None else max(seen, value)
    return values


def fill_counts(counts: Iterable[tuple[int, int]], window: Window) -> list[int]:
    """``(slot number, count)`` pairs (slot number = minute bucket // slot minutes) as
    one count per slot of ``window``, 0 where there is none; others are dropped."""
    values = [0] * window.slots
    for slot, count in counts:
        index = slot - window.first_slot
        if 0 <= index < window.slots:
            values[index] += count
    return values


# --- axes ---


def value_ticks(peak: int, intervals: int = VALUE_INTERVALS) -> list[int]:
    """0 and whole steps of 1, 2 or 5 times a power of 10, up to the first at or above
    ``peak``, in at most ``intervals`` steps (at least one: ``[0, 1]`` for a peak of 0)."""
    peak = max(peak, 0)
    wanted = max(peak / intervals, 1)
    magnitude = 1
    while magnitude * 10 <= wanted:
        magnitude *= 10
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= wanted)
    top = max(step, -(-peak // step) * step)
    return list(range(0, top + 1, step))


def count_label(value: int) -> str:
    """A value tick's label: ``40``, ``1.5k``, ``2M``."""
    if abs(value) < 1000:
        return str(value)
    if abs(value) < 1_000_000:
        return f"{value / 1000:g}k"
    return f"{value / 1_000_000:g}M"


def time_ticks(start_ms: int, end_ms: int, most: int = TIME_TICKS) -> list[tuple[int, str]]:
    """``(at_ms, label)`` of the time axis from ``start_ms`` to ``end_ms``: every whole
    step (the smallest of :data:`TIME_STEPS_MINUTES` giving at most ``most`` ticks),
    aligned to UTC; labelled ``HH:MM`` (UTC), or ``Mon D`` on day steps and at midnight
    on steps of an hour or more."""
    span_minutes = max(end_ms - start_ms, 0) / clock.MINUTE_MS
    step_minutes = next(
        (step for step in TIME_STEPS_MINUTES if span_minutes / step <= most),
        TIME_STEPS_MINUTES[-1],
    )
    step_ms = step_minutes * clock.MINUTE_MS
    first = -(-start_ms // step_ms) * step_ms
    ticks = []
    for at_ms in range(first, end_ms + 1, step_ms):
        moment = datetime.fromtimestamp(at_ms / 1000, UTC)
        dated = step_minutes >= 1440 or (step_minutes >= 60 and at_ms % DAY_MS == 0)
        label = f"{moment:%b} {moment.day}" if dated else f"{moment:%H:%M}"
        ticks.append((at_ms, label))
    return ticks


# --- the chart ---


@dataclass(frozen=True)
class Series:
    """One line: its legend label, its CSS class, one value per slot (``None``: a gap)."""

    label: str
    css_class: str
    values: tuple[int | None, ...]


@dataclass(frozen=True)
class Tick:
    """A tick: the value (or epoch milliseconds), its label, its pixel coordinate."""

    value: int
    label: str
    at: float


@dataclass(frozen=True)
class Line:
    """A series as drawn: one ``points`` text per run of two or more consecutive values,
    and a dot for each value standing alone."""

    series: Series
    runs: tuple[str, ...]
    dots: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    window: Window
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    lines: tuple[Line, ...]
    #: The highest value of any series in the window (0 without any).
    peak: int
    #: Slots in which some series has a value.
    filled_slots: int
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def range_name(self) -> str:
        return self.window.range_name

    @property
    def plot(self) -> tuple[int, int, int, int]:
        """``(left, top, right, bottom)`` of the plot area."""
        return LEFT, TOP, self.width - RIGHT, self.height - BOTTOM

    @property
    def top_value(self) -> int:
        """The value at the top of the plot area (the highest tick)."""
        return self.y_ticks[-1].value


def _coordinate(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def build_chart(title: str, unit: str, window: Window, series: Sequence[Series]) -> Chart:
    """The axes and lines of ``series`` (each with one value per slot of ``window``)."""
    for line in series:
        if len(line.values) != window.slots:
            raise ValueError(f"{line.label}: {len(line.values)} values for {window.slots} slots")
    present = [value for line in series for value in line.values if value is not None]
    peak = max(present, default=0)
    left, top, right, bottom = LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM
    plot_width, plot_height = right - left, bottom - top
    tick_values = value_ticks(peak)
    top_value = tick_values[-1]

    def x_of(at_ms: float) -> float:
        return left + (at_ms - window.start_ms) * plot_width / (window.end_ms - window.start_ms)

    def y_of(value: float) -> float:
        return bottom - value * plot_height / top_value

    def point(index: int, value: int) -> tuple[float, float]:
        return x_of(window.start_ms + (index + 0.5) * window.slot_ms), y_of(value)

    lines = []
    for line in series:
        runs: list[list[tuple[float, float]]] = [[]]
        for index, value in enumerate(line.values):
            if value is None:
                runs.append([])
            else:
                runs[-1].append(point(index, value))
        lines.append(
            Line(
                series=line,
                runs=tuple(
                    " ".join(f"{_coordinate(x)},{_coordinate(y)}" for x, y in run)
                    for run in runs
                    if len(run) > 1
                ),
                dots=tuple(run[0] for run in runs if len(run) == 1),
            )
        )
    filled = sum(
        any(line.values[index] is not None for line in series) for index in range(window.slots)
    )
    return Chart(
        title=title,
        unit=unit,
        window=window,
        x_ticks=tuple(
            Tick(at_ms, label, x_of(at_ms))
            for at_ms, label in time_ticks(window.start_ms, window.end_ms)
        ),
        y_ticks=tuple(Tick(value, count_label(value), y_of(value)) for value in tick_values),
        lines=tuple(lines),
        peak=peak,
        filled_slots=filled,
    )


def chart_svg(chart: Chart) -> str:
    """The chart as an ``<svg>`` element (every text escaped); its colours come from
    ``later_django/dashboard.css`` (CSS variables, light and dark)."""
    left, top, right, bottom = chart.plot
    width, height = chart.width, chart.height
    title = escape(f"{chart.title}, last {chart.range_name}")
    middle = (top + bottom) / 2
    parts = [
        f'<svg class="later-chart" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{title}">',
        f"<title>{title}</title>",
        f'<rect class="later-chart-frame" x="{left}" y="{top}" '
        f'width="{right - left}" height="{bottom - top}"/>',
        f'<text class="later-chart-title" x="{left}" y="16">{title}</text>',
        f'<text class="later-chart-note" x="{right}" y="16" text-anchor="end">times UTC</text>',
        f'<text class="later-chart-unit" x="14" y="{_coordinate(middle)}" text-anchor="middle" '
        f'transform="rotate(-90 14 {_coordinate(middle)})">{escape(chart.unit)}</text>',
        '<g class="later-chart-grid">',
    ]
    for tick in chart.y_ticks[1:]:
        y = _coordinate(tick.at)
        parts.append(f'<line x1="{left}" x2="{right}" y1="{y}" y2="{y}"/>')
    parts.append("</g>")
    parts.append('<g class="later-chart-axis later-chart-y-axis">')
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{bottom}"/>')
    for tick in chart.y_ticks:
        y = _coordinate(tick.at)
        parts.append(f'<line x1="{left - 4}" x2="{left}" y1="{y}" y2="{y}"/>')
        parts.append(
            f'<text x="{left - 7}" y="{y}" text-anchor="end" dominant-baseline="middle">'
            f"{escape(tick.label)}</text>"
        )
    parts.append("</g>")
    parts.append('<g class="later-chart-axis later-chart-x-axis">')
    parts.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}"/>')
    for tick in chart.x_ticks:
        x = _coordinate(tick.at)
        parts.append(f'<line x1="{x}" x2="{x}" y1="{bottom}" y2="{bottom + 4}"/>')
        parts.append(
            f'<text x="{x}" y="{bottom + 17}" text-anchor="middle">{escape(tick.label)}</text>'
        )
    parts.append("</g>")
    for line in chart.lines:
        css = escape(line.series.css_class)
        for run in line.runs:
            parts.append(f'<polyline class="later-chart-line {css}" fill="none" points="{run}"/>')
        for dot_x, dot_y in line.dots:
            parts.append(
                f'<circle class="later-chart-dot {css}" cx="{_coordinate(dot_x)}" '
                f'cy="{_coordinate(dot_y)}" r="2.5"/>'
            )
    if not chart.filled_slots:
        parts.append(
            f'<text class="later-chart-note" x="{(left + right) // 2}" '
            f'y="{_coordinate(middle)}" text-anchor="middle">no readings</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)
