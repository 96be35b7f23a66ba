"""Schedule arithmetic of recurring jobs: cron expressions and time zones checked,
and the ticks of a schedule computed.

Cron expressions are parsed by croniter: five fields (minute hour day month
weekday) or six with a trailing *seconds* field (``* * * * * */10``: every ten
seconds). Ticks are computed on timezone-aware datetimes in the definition's
time zone, so DST is croniter's (a 02:30 tick on a spring-forward day runs once,
at the first existing instant after it). Pure functions: nothing here reads or
writes storage.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

DEFAULT_TIMEZONE = "UTC"


def validate_timezone(name: Any, recurring_id: str) -> str:
    """Returns the zoneinfo name (``None`` → ``"UTC"``) or raises ``ValueError``."""
    if name is None:
        return DEFAULT_TIMEZONE
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"timezone {name!r} of recurring job {recurring_id!r} must be an IANA time zone "
            f"name such as 'Europe/Paris'"
        )
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"timezone {name!r} of recurring job {recurring_id!r} is not a known IANA time "
            f"zone name (zoneinfo)"
        ) from None
    return name


def cron_problem(cron: Any) -> str | None:
    """Why ``cron`` is not a valid croniter expression, or ``None`` when it is."""
    if not isinstance(cron, str) or not cron.strip():
        return f"cron expression {cron!r} must be a non-empty string"
    if not croniter.is_valid(cron):
        return (
            f"cron expression {cron!r} is not valid (5 fields: minute hour day month "
            f"weekday, or 6 with a trailing seconds field)"
        )
    try:  # is_valid accepts expressions that never match (30 February, a past year)
        croniter(cron, datetime.now(UTC)).get_next(datetime)
    except Exception as error:  # croniter raises CroniterBadDateError and others
        return f"cron expression {cron!r} never matches a date from now on ({error})"
    return None


def validate_cron(cron: Any, recurring_id: str) -> str:
    """Returns ``cron`` or raises ``ValueError`` naming the expression and the id."""
    problem = cron_problem(cron)
    if problem is not None:
        raise ValueError(f"{problem}; recurring job {recurring_id!r}")
    return str(cron)


def _aware(epoch_ms: int, timezone: str) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=ZoneInfo(timezone))


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def next_tick_ms(cron: str, timezone: str, after_ms: int) -> int:
    """The first tick of ``cron`` strictly after ``after_ms``, in ``timezone``."""
    moment = croniter(cron, _aware(after_ms, timezone)).get_next(datetime)
    # croniter works in whole seconds: a start inside a second can give that
    # second back; step until the tick is strictly later.
    while _ms(moment) <= after_ms:
        moment = croniter(cron, moment).get_next(datetime)
    return _ms(moment)


def last_tick_ms(cron: str, timezone: str, at_or_before_ms: int) -> int:
    """The last tick of ``cron`` at or before ``at_or_before_ms``, in ``timezone``."""
    moment = croniter(cron, _aware(at_or_before_ms + 1, timezone)).get_prev(datetime)
    while _ms(moment) > at_or_before_ms:
        moment = croniter(cron, moment).get_prev(datetime)
    return _ms(moment)
