"""Errors a caller can act on. Messages name the value and the rule it broke."""

from collections.abc import Sequence


class LaterError(Exception):
    """Base class of later_django's own errors."""


class RecordDecodeError(LaterError):
    """A stored record or queue message could not be decoded."""


class ParentFailed(LaterError):
    """Recorded as the error of a continuation whose parent failed (``on="success"``)."""


class JobCancelled(LaterError):
    """Recorded as the error of a cancelled job; raised inside a task by
    :func:`later_django.api.check_cancelled` once its cancel was requested. A task
    that raises it is recorded cancelled (not retried) even without a request."""


class TaskTimeout(LaterError):
    """Recorded as the error of an attempt that ran past its timeout (``@task(timeout=)``
    or ``LATER["TIMEOUT"]``); it is retried by the task's retry policy."""


class WorkerLost(LaterError):
    """Recorded as the error of an attempt whose worker stopped renewing its lease."""


class StaleLease(LaterError):
    """A consumer committed an offset of a retained-log partition whose lease it no
    longer holds (released, or taken over with a higher epoch); nothing was changed."""


class StageMoveError(LaterError):
    """A move the stage machine does not allow."""


class ActionRefused(LaterError):
    """The action cannot be done on this job now; the message says why."""


class TopicNotConfigured(LaterError, ValueError):
    """A topic that is not in ``LATER["TOPICS"]`` (nor reserved) was used."""


class TopicLayoutMismatch(LaterError, ValueError):
    """A topic's configured partition count differs from the one stored for it."""


class ParentNotFound(LaterError):
    """``continue_with`` named a parent job that does not exist (or has expired)."""


class ParentResultMissing(LaterError):
    """A child read ``context.parent_results`` and a parent's record is gone (deleted by
    an operator, or swept): its result cannot be passed. The job fails without retry."""


class ResultTooLarge(LaterError):
    """A task returned a value whose encoding is over ``LATER["RESULT_MAX_BYTES"]``.
    The job fails without retry (running it again returns as much)."""


class UniqueKeyContended(LaterError):
    """A unique job's key changed hands in every round of its enqueue: other processes
    enqueue and finish jobs of that key nonstop. Nothing was written; try again."""


class UnregisteredTaskError(LaterError):
    """The record's task path does not lead to a registered ``django.tasks.Task``."""


class TablesMissing(LaterError):
    """later_django's tables are not in the database: its migrations were not applied.

    ``using`` is the database alias, ``missing`` the absent tables (sorted).
    """

    def __init__(self, using: str, missing: Sequence[str]) -> None:
        self.using = using
        self.missing = tuple(missing)
        shown = ", ".join(self.missing[:3])
        if len(self.missing) > 3:
            shown += f" and {len(self.missing) - 3} more"
        super().__init__(
            f"later_django's tables are missing: run manage.py migrate "
            f"(database {using!r} has no {shown})"
        )


def class_path(kind: type[BaseException]) -> str:
    """The dotted path stored as a failed attempt's ``exception_class_path``."""
    return f"{kind.__module__}.{kind.__qualname__}"
