"""The pytest fixture ``later_jobs`` (needs pytest-django).

Enable it in the project's root ``conftest.py``::

    pytest_plugins = ["later_django.testing.pytest_plugin"]

``later_jobs`` asks for pytest-django's ``db`` fixture, so a test that uses it
may access the database without a marker; ``@pytest.mark.django_db(transaction=True,
databases=[...])`` on the test still decides how (a rolled-back transaction by
default, or committed writes) and which databases.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import pytest

from later_django.compat.tasks import Task, TaskResult
from later_django.testing.runs import DEFAULT_MAX_JOBS, run_jobs


class LaterJobs:
    """What the ``later_jobs`` fixture gives a test: :meth:`run`, and every result so far."""

    def __init__(self) -> None:
        #: Every ``TaskResult`` :meth:`run` returned during the test, in order.
        self.results: list[TaskResult] = []

    def run(
        self,
        *,
        queue: str | Iterable[str] | None = None,
        task: Task | str | None = None,
        max_jobs: int = DEFAULT_MAX_JOBS,
        include_delayed: bool = False,
        now: datetime | None = None,
    ) -> list[TaskResult]:
        """:func:`later_django.testing.run_jobs` with the same options; also keeps the
        results in :attr:`results`."""
        ran = run_jobs(
            queue=queue, task=task, max_jobs=max_jobs, include_delayed=include_delayed, now=now
        )
        self.results.extend(ran)
        return ran


@pytest.fixture
def later_jobs(db: None) -> LaterJobs:
    """Runs the test's queued jobs on demand: ``later_jobs.run(...)`` (see
    :func:`later_django.testing.run_jobs`)."""
    return LaterJobs()
