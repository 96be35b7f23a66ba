"""The benchmark's tasks, on the ``default`` backend of whichever system is configured."""

import time

from later_django.compat.tasks import task


@task
def noop() -> None:
    """Does nothing: the drain measures the job path alone."""


@task
def batch_done(outcome: object) -> None:
    """A batch's callback that does nothing (the ``batch`` scenario)."""


@task
def stamp(enqueued_at: float) -> float:
    """Returns the wall-clock time at which it started (``enqueued_at`` rides along)."""
    return time.time()


@task(takes_context=True)
def chain_step(context) -> int:
    """One step of the ``chain_results`` chain: its parent's result plus one (1 for the
    first step, which has no parent)."""
    return sum(context.parent_results.values()) + 1


@task(takes_context=True)
def chain_step_blind(context) -> int:
    """``chain_step`` that never reads its parent's result: the plain chain's step."""
    return 1
