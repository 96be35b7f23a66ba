"""Figures in the units an operator reads: durations (``850 ms``, ``12 s``, ``3.5 min``,
``2.1 h``, ``3 d``), ages since a moment, counts (``950``, ``1.2k``, ``34k``, ``5.6M``),
queue rates (``100 / 1 min``), and the
stored epoch milliseconds as datetimes for the templates.

Pure functions of numbers (no Django, no clock): the pages pass ``now_ms``.
"""

from __future__ import annotations

from datetime import UTC, datetime

SECOND_MS = 1000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
#: What a missing figure shows.
NONE_TEXT = "\N{EN DASH}"

#: (milliseconds per unit, unit, the value from which the next unit is used).
_UNITS: tuple[tuple[int, str, float | None], ...] = (
    (1, "ms", SECOND_MS),
    (SECOND_MS, "s", 60),
    (MINUTE_MS, "min", 60),
    (HOUR_MS, "h", 24),
    (DAY_MS, "d", None),
)

#: (count per unit, suffix, the value from which the next unit is used).
_COUNT_UNITS: tuple[tuple[int, str, float | None], ...] = (
    (1, "", 1000),
    (1000, "k", 1000),
    (1_000_000, "M", None),
)


def _number(value: float) -> str:
    """One decimal below 10, none from 10 on, a trailing ``.0`` dropped."""
    return (f"{value:.1f}" if value < 10 else f"{value:.0f}").removesuffix(".0")


def when(epoch_ms: int | None) -> datetime | None:
    """An aware UTC datetime for an epoch-milliseconds value (``None`` stays ``None``)."""
    if epoch_ms is None:
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def human_duration(ms: float | None) -> str:
    """``ms`` milliseconds in the largest unit in which it is at least 1: ``850 ms``,
    ``12 s``, ``3.5 min``, ``2.1 h``, ``3 d``. Milliseconds are whole; other units have
    one decimal below 10 and none from 10 on (``.0`` dropped); a value that rounds up
    to the next unit's size is shown in that unit (``59.96 s`` is ``1 min``). ``None``
    is :data:`NONE_TEXT` (an en dash); below zero counts as 0."""
    if ms is None:
        return NONE_TEXT
    ms = max(float(ms), 0.0)
    for size, unit, limit in _UNITS:
        text = str(round(ms)) if size == 1 else _number(ms / size)
        if limit is None or float(text) < limit:
            return f"{text} {unit}"
    raise AssertionError("the last unit has no limit")  # pragma: no cover


def human_age(now_ms: int, at_ms: int | None) -> str:
    """How long ago ``at_ms`` was at ``now_ms`` (:func:`human_duration`; a moment in
    the future, e.g. another host's clock ahead, is ``0 ms``)."""
    return NONE_TEXT if at_ms is None else human_duration(now_ms - at_ms)


def human_rate(count: int | None, window_ms: int | None) -> str:
    """A rate limit: ``100 / 1 min`` (at most ``count`` starts per ``window_ms``);
    :data:`NONE_TEXT` without one."""
    if count is None or window_ms is None:
        return NONE_TEXT
    return f"{count} / {human_duration(window_ms)}"


def human_count(count: int) -> str:
    """``count`` exact below 1,000, else in thousands or millions with :func:`_number`'s
    decimals: ``950``, ``1.2k``, ``34k``, ``5.6M``; a value that rounds up to the next
    unit's size is shown in that unit (``999,960`` is ``1M``)."""
    for size, suffix, limit in _COUNT_UNITS:
        text = str(count) if size == 1 else _number(count / size)
        if limit is None or abs(float(text)) < limit:
            return text + suffix
    raise AssertionError("the last unit has no limit")  # pragma: no cover
