"""A job's attempts as its page lists them, read from its record alone.

The record keeps every stage it went through with the time (``history``, then the
current stage), one worker id per attempt (``worker_ids``) and the error of each
failed attempt with its number (``errors``). An attempt is a ``running`` entry: it
began then and ended at the next entry, whose stage says how, in the outcome names
the task pages count (:func:`later_django.core.attempts.attempt_outcome`). Pure: no
read, no clock (the page passes ``now_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from later_django.admin.units import human_duration, when
from later_django.core import stages
from later_django.core.attempts import attempt_outcome
from later_django.core.records import JobError, JobRecord
from later_django.exceptions import TaskTimeout, class_path

#: The outcome of the attempt running now.
RUNNING_NOW = "running"
_TIMEOUT_PATH = class_path(TaskTimeout)


@dataclass(frozen=True)
class Attempt:
    """One attempt: when it began, how long it ran (so far), on which worker, how it
    ended and, when it failed, its error."""

    number: int
    started_at: datetime | None
    ran_for: str
    worker_id: str | None
    outcome: str
    error: JobError | None


def attempts_of(record: JobRecord, now_ms: int) -> list[Attempt]:
    """The record's attempts, first first (an attempt running now is the last)."""
    entries = [*record.history, (record.stage, record.stage_at_ms)]
    errors = {error.attempt: error for error in record.errors}
    found: list[Attempt] = []
    for index, (stage, began_ms) in enumerate(entries):
        if stage != stages.RUNNING:
            continue
        number = len(found) + 1
        error = errors.get(number)
        if index + 1 < len(entries):
            outcome_stage, ended_ms = entries[index + 1]
            outcome = _outcome(outcome_stage, error)
        else:
            ended_ms, outcome = now_ms, RUNNING_NOW
        found.append(
            Attempt(
                number=number,
                started_at=when(began_ms),
                ran_for=human_duration(ended_ms - began_ms),
                worker_id=(
                    record.worker_ids[number - 1] if number <= len(record.worker_ids) else None
                ),
                outcome=outcome,
                error=error,
            )
        )
    return found


def _outcome(stage: str, error: JobError | None) -> str:
    """The attempt's outcome (:mod:`later_django.core.attempts`, as the task pages count
    it) from the stage it moved to; a stage no attempt ends in is shown as it is."""
    timed_out = error is not None and error.exception_class_path == _TIMEOUT_PATH
    try:
        return attempt_outcome(stage, timed_out=timed_out)
    except ValueError:
        return stage
