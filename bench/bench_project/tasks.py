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
