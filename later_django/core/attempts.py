"""How an attempt of a job ended: the one list of attempt outcomes.

An attempt is one call of the task by a worker (or one the worker lost). Its outcome
is read from the stage its record moved to when the attempt was written, and from
the error it recorded: the per-task figures (``later_task_minute``) count attempts by
these names.
"""

from __future__ import annotations

from later_django.core import stages

SUCCEEDED = "succeeded"
#: Raised (or its worker was lost), and a retry is due.
RETRIED = "retried"
#: Raised (or its worker was lost), and no retry is left: the job is failed.
FAILED = "failed"
#: The job's cancel was requested while it ran, or the task raised ``JobCancelled``.
CANCELLED = "cancelled"
#: Ran past its timeout (``TaskTimeout``), whether a retry is due or not.
TIMED_OUT = "timed_out"

#: Every outcome, in the order the pages show them.
ATTEMPT_OUTCOMES: tuple[str, ...] = (SUCCEEDED, RETRIED, FAILED, TIMED_OUT, CANCELLED)
#: The outcomes of attempts that did not succeed through an error of their own: they
#: carry their error's class path, and the failure rate counts them.
FAILING_OUTCOMES: tuple[str, ...] = (RETRIED, FAILED, TIMED_OUT)

#: The stage an attempt's record moves to -> its outcome (before a timeout is told apart).
_OUTCOME_OF_STAGE = {
    stages.SUCCESS: SUCCEEDED,
    stages.FAILED: FAILED,
    stages.CANCELLED: CANCELLED,
    # A retry is requeued, or enqueued at once when its back-off is zero.
    stages.REQUEUED: RETRIED,
    stages.ENQUEUED: RETRIED,
}


def attempt_outcome(stage: str, *, timed_out: bool) -> str:
    """The outcome of an attempt whose record was written in ``stage``; ``timed_out``
    (its error is ``TaskTimeout``) makes a retry or a failure :data:`TIMED_OUT`.
    ``ValueError`` for a stage no attempt ends in."""
    try:
        outcome = _OUTCOME_OF_STAGE[stage]
    except KeyError:
        ends = sorted(_OUTCOME_OF_STAGE)
        raise ValueError(f"no attempt ends in stage {stage!r}; one ends in one of {ends}") from None
    return TIMED_OUT if timed_out and outcome in (RETRIED, FAILED) else outcome
