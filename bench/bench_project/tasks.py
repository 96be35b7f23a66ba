"""The benchmark's tasks, on the ``default`` backend of whichever system is configured."""

import time

from later_django.compat.tasks import task


@task
def noop() -> None:
    """Does nothing: the drain measures the job path alone."""


@task
def stamp(enqueued_at: float) -> float:
    """Returns the wall-clock time at which it started (``enqueued_at`` rides along)."""
    return time.time()
