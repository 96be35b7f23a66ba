"""One place that parses values from outside: URL parameters, form fields and command
line options.

Every parser takes the field's name (as the user wrote it: ``?cursor``, ``--since``)
and the raw text, and returns a typed value or raises :class:`InputError`, whose
message names the field, the value (cut to :data:`SHOWN_LENGTH` characters, so a
100,000-character value is never echoed back whole) and the rule it broke. The
dashboard turns an ``InputError`` into a 400 page, the commands into a
``CommandError``: both refuse the same things in the same words, before any query,
on every database.

Rules every parser applies: no NUL (PostgreSQL's text cannot hold it; SQLite can, so
refusing it first makes both databases answer alike), a length limit for text,
integers in ASCII digits only (``int()`` also takes ``²``, Arabic-Indic digits and ``1_000``) and
within what their column holds, no NaN or infinity, durations of at least a
millisecond.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime

from later_django.conf import NAMESPACE_PATTERN

#: How much of a refused value a message shows.
SHOWN_LENGTH = 80
#: The longest name of a queue, a topic, a task path or a job id (the columns' size).
NAME_LENGTH = 200
#: The longest free text a filter or a note takes.
TEXT_LENGTH = 1_000
#: What a ``bigint`` column holds.
BIGINT_MAX = 2**63 - 1
#: What an ``integer`` column holds.
INT_MAX = 2**31 - 1

_DIGITS = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_TASK_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
_JOB_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


class InputError(ValueError):
    """A value from outside that breaks its field's rule."""

    def __init__(self, field: str, value: object, rule: str) -> None:
        self.field = field
        self.value = value
        self.rule = rule
        super().__init__(f"{field} {shown(value)} {rule}")


def shown(value: object) -> str:
    """``value``'s repr, cut to :data:`SHOWN_LENGTH` characters with the full length
    named when it is longer."""
    if isinstance(value, str) and len(value) > SHOWN_LENGTH:
        return f"{value[:SHOWN_LENGTH]!r}… ({len(value):,} characters)"
    return repr(value)


def text(field: str, value: str, *, max_length: int = TEXT_LENGTH, empty: bool = False) -> str:
    """``value`` itself when it has no NUL, at most ``max_length`` characters, and is
    not empty (unless ``empty``)."""
    if not isinstance(value, str):
        raise InputError(field, value, "is not text")
    if "\x00" in value:
        raise InputError(field, value, "contains a NUL character")
    if len(value) > max_length:
        raise InputError(field, value, f"is longer than {max_length:,} characters")
    if not value and not empty:
        raise InputError(field, value, "is empty")
    return value


def name(field: str, value: str) -> str:
    """A queue, topic or group name: :func:`text` of at most :data:`NAME_LENGTH`
    characters, without leading or trailing white space."""
    text(field, value, max_length=NAME_LENGTH)
    if value != value.strip():
        raise InputError(field, value, "has leading or trailing white space")
    return value


def job_id(field: str, value: str) -> str:
    """A job id: 26 characters of Crockford base 32 (a ULID), upper case."""
    text(field, value, max_length=NAME_LENGTH)
    if not _JOB_ID.fullmatch(value):
        raise InputError(field, value, "is not a job id (26 characters of Crockford base 32)")
    return value


def task_path(field: str, value: str) -> str:
    """A task's dotted module path (``app.tasks.send_mail``)."""
    text(field, value, max_length=NAME_LENGTH)
    if not _TASK_PATH.fullmatch(value):
        raise InputError(field, value, "is not a dotted task path (module.function)")
    return value


def namespace(field: str, value: str) -> str:
    """A namespace name: 1 to 200 letters, digits, ``_`` or ``.`` (check E002's rule)."""
    text(field, value, max_length=NAME_LENGTH)
    if not NAMESPACE_PATTERN.fullmatch(value):
        raise InputError(field, value, "is not a namespace name (letters, digits, '_' or '.')")
    return value


def integer(field: str, value: str, *, low: int = 0, high: int = BIGINT_MAX) -> int:
    """An integer written in ASCII digits (an optional sign), from ``low`` to ``high``."""
    text(field, value, max_length=40)
    if not _DIGITS.fullmatch(value):
        raise InputError(field, value, "is not a whole number")
    number = int(value)
    if not low <= number <= high:
        raise InputError(field, value, f"is not between {low:,} and {high:,}")
    return number


def seconds(
    field: str, value: str, *, low: float = 0.001, high: float = 365 * 24 * 3600.0
) -> float:
    """A duration in seconds (a decimal number), finite, from ``low`` (by default a
    millisecond) to ``high`` (by default a year)."""
    text(field, value, max_length=40)
    if not _DECIMAL.fullmatch(value):
        raise InputError(field, value, "is not a number of seconds")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise InputError(field, value, f"is not between {low:g} and {high:g} seconds")
    return number


def moment(field: str, value: str) -> datetime:
    """An ISO 8601 date and time (``2026-12-01T08:00``; no offset means UTC), as an
    aware datetime."""
    text(field, value, max_length=40)
    try:
        parsed = parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise InputError(
            field, value, "is not an ISO 8601 date and time (e.g. 2026-12-01T08:00+00:00)"
        )
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def one(field: str, values: Sequence[str]) -> str | None:
    """The one value of a parameter that may be given once (``None`` when absent);
    given twice, it is refused rather than the last one silently winning."""
    if len(values) > 1:
        raise InputError(field, list(values)[:3], f"is given {len(values)} times; give it once")
    return values[0] if values else None


def confirmed(values: Sequence[str]) -> bool:
    """Whether a confirmation was given: exactly one value, ``yes``. Anything else
    (absent, another value, given twice) is not a confirmation."""
    return list(values) == ["yes"]


# Dashboard parsers (helper-13)

#: The forms of a job list's cursor, as :mod:`later_django.admin.job_lists` writes them
#: (written out here: this module imports neither the admin nor the storage).
_INDEX_CURSOR = re.compile(r"i(?::([0-9]{1,40}):(.*))?", re.DOTALL)
_QUEUE_CURSOR = re.compile(r"q:([0-9]{1,40})")
_CURSOR_RULE = (
    "is not a job-list cursor (i, i:<milliseconds>:<job id> or q:<sequence>, "
    "as the list's own links write it)"
)


def job_list_cursor(field: str, value: str) -> str | None:
    """A job list's cursor as its links write it: ``i``, ``i:<ms>:<job id>`` or
    ``q:<sequence>`` (numbers in ASCII digits within a ``bigint``; the job id at most
    :data:`NAME_LENGTH` characters), returned as given; ``None`` when empty (the
    list's start). Anything else is refused, so a bulk action never reads an
    unreadable cursor as "from the start"."""
    text(field, value, max_length=NAME_LENGTH + 50, empty=True)
    if not value:
        return None
    if matched := _INDEX_CURSOR.fullmatch(value):
        moment_text, job = matched.groups()
        if moment_text is not None:
            _cursor_number(field, value, moment_text)
            text(field, job, max_length=NAME_LENGTH, empty=True)
        return value
    if matched := _QUEUE_CURSOR.fullmatch(value):
        _cursor_number(field, value, matched.group(1))
        return value
    raise InputError(field, value, _CURSOR_RULE)


def _cursor_number(field: str, value: str, digits: str) -> int:
    """The number inside a cursor, refused (naming the whole cursor) beyond a bigint."""
    number = int(digits)
    if number > BIGINT_MAX:
        raise InputError(field, value, f"holds a number beyond {BIGINT_MAX:,}")
    return number


def sequence_cursor(field: str, value: str) -> int | None:
    """A partition list's cursor: the last sequence shown, ASCII digits within a
    ``bigint``; ``None`` when empty (the newest first)."""
    if value == "":
        return None
    return integer(field, value, low=0, high=BIGINT_MAX)


def filter_value(field: str, value: str, *, max_length: int = NAME_LENGTH) -> str:
    """A dashboard list filter: :func:`text` of at most ``max_length`` characters, empty
    allowed (an empty filter means no filter), surrounding blanks dropped."""
    return text(field, value, max_length=max_length, empty=True).strip()


# Command parsers (helper-14)


def local_moment(field: str, value: str) -> datetime:
    """:func:`moment`'s rule, but a time without an offset is read in the current
    time zone (``TIME_ZONE``), as ``later_jobs --since`` and the ``later_django.api``
    bulk actions read a naive time; an aware datetime either way."""
    from django.utils import timezone  # here: the block stays one contiguous piece

    parsed = moment(field, value)
    if parse_datetime(value).tzinfo is None:
        return timezone.make_aware(parsed.replace(tzinfo=None))
    return parsed
