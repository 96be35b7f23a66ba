"""The filters of a job list as the page's GET parameters, and the selection they make.

``task`` (a task's module path, or a prefix of paths ending in ``*``), ``queue``,
``since``/``until`` (when the job entered its stage: ``1h``, ``1d``, ``7d`` for the
last hour, day or week before now, or an ISO 8601 date and time, read in the
current time zone unless it names an offset) and ``error`` (the class path of the
job's last error). The same parameters travel in the pager links, the bulk form
and the confirmation page, so each of them acts on what the list showed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime

from django.http import QueryDict
from django.utils import timezone

from later_django import inputs
from later_django.engine.job_actions.selection import JobSelection

#: The relative times ``since`` and ``until`` take: value -> (words, milliseconds).
RELATIVE_TIMES = {
    "1h": ("the last hour", 3_600_000),
    "1d": ("the last day", 86_400_000),
    "7d": ("the last week", 604_800_000),
}
#: The character that makes ``task`` a prefix of task paths.
PREFIX_MARK = "*"
#: The longest value of each filter: a name column's size (``task`` one more, for the
#: prefix mark), a date and time's for the times. Longer values are refused (400),
#: never echoed whole nor carried into a redirect.
FILTER_LENGTHS = {
    "task": inputs.NAME_LENGTH + len(PREFIX_MARK),
    "queue": inputs.NAME_LENGTH,
    "since": 40,
    "until": 40,
    "error": inputs.NAME_LENGTH,
}
_TIME_RULE = (
    "use 1h, 1d or 7d (the last hour, day, week) or an ISO 8601 date and time such as "
    "2026-12-03T09:30 (the current time zone unless an offset such as +00:00 is given)"
)


class FilterError(ValueError):
    """A filter value the list cannot use; the message names the value and the rule."""


@dataclass(frozen=True)
class ListFilter:
    """The filter values as given (text, ``""`` when absent)."""

    task: str = ""
    queue: str = ""
    since: str = ""
    until: str = ""
    error: str = ""

    @classmethod
    def from_query(cls, query: QueryDict) -> ListFilter:
        """The filters of a request's parameters (surrounding blanks dropped; empty or
        absent: no filter); ``InputError`` for one given twice, holding a NUL or longer
        than :data:`FILTER_LENGTHS` allows."""
        values = {}
        for f in fields(cls):
            given = inputs.one(f.name, query.getlist(f.name)) or ""
            values[f.name] = inputs.filter_value(f.name, given, max_length=FILTER_LENGTHS[f.name])
        return cls(**values)

    def params(self) -> dict[str, str]:
        """The filters that are set, as parameters for a link or a form."""
        return {name: value for name, value in asdict(self).items() if value}

    def is_empty(self) -> bool:
        return not self.params()

    def selection(self, stage: str, now_ms: int) -> JobSelection:
        """The :class:`JobSelection` of ``stage`` these filters make; ``FilterError``
        naming the value and the rule for one that is not valid."""
        task_path, task_prefix = _task_filter(self.task)
        since_ms = _time_ms("since", self.since, now_ms)
        until_ms = _time_ms("until", self.until, now_ms)
        if since_ms is not None and until_ms is not None and since_ms > until_ms:
            raise FilterError(
                f"since {self.since!r} is after until {self.until!r}: "
                "the time range must start before it ends"
            )
        return JobSelection(
            stage=stage,
            task_path=task_path,
            task_prefix=task_prefix,
            queue_name=self.queue or None,
            since_ms=since_ms,
            until_ms=until_ms,
            error_class=self.error or None,
        )

    def in_words(self) -> str:
        """The filters as a phrase (``""`` when none), e.g. ``of a task whose path
        starts with 'billing.', in queue 'emails', that entered the stage in the last
        hour``."""
        parts = []
        if self.task.endswith(PREFIX_MARK):
            parts.append(f"of a task whose path starts with {self.task[:-1]!r}")
        elif self.task:
            parts.append(f"of task {self.task!r}")
        if self.queue:
            parts.append(f"in queue {self.queue!r}")
        if self.error:
            parts.append(f"whose last error is {self.error!r}")
        times = [_time_in_words("since", self.since), _time_in_words("until", self.until)]
        if any(times):
            parts.append("that entered the stage " + " and ".join(t for t in times if t))
        return ", ".join(parts)


def _task_filter(task: str) -> tuple[str | None, str | None]:
    """``(exact path, prefix)`` of the ``task`` value (one of them, or neither)."""
    if not task:
        return None, None
    prefix, mark, rest = task.partition(PREFIX_MARK)
    if not mark:
        return task, None
    if rest or not prefix:
        raise FilterError(
            f"task {task!r} is not a task path or prefix: give a module path "
            f"(app.tasks.send) or the start of one followed by a single {PREFIX_MARK} "
            f"at the end (app.tasks.{PREFIX_MARK})"
        )
    return None, prefix


def _time_ms(name: str, value: str, now_ms: int) -> int | None:
    """Epoch milliseconds of a ``since``/``until`` value (``None`` when empty)."""
    if not value:
        return None
    if value in RELATIVE_TIMES:
        return now_ms - RELATIVE_TIMES[value][1]
    try:
        moment = datetime.fromisoformat(value)
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment)
        return int(moment.timestamp() * 1000)
    except (ValueError, OverflowError):
        # A time at the edge of the calendar (year 1 in a zone west of UTC) fails here too.
        raise FilterError(f"{name} {value!r} is not a time: {_TIME_RULE}") from None


def _time_in_words(name: str, value: str) -> str:
    if not value:
        return ""
    if value in RELATIVE_TIMES:
        words = RELATIVE_TIMES[value][0]
        return f"in {words}" if name == "since" else f"before {words}"
    return f"{'at or after' if name == 'since' else 'at or before'} {value}"
