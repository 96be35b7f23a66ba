"""Helpers for an application's own tests: run its queued jobs without a worker process.

:func:`run_jobs` runs what is queued in the test's database and transaction,
synchronously, through the same start, task call and finish as ``later_worker``.
The pytest fixture ``later_jobs`` is in :mod:`later_django.testing.pytest_plugin`.
See docs/testing-your-tasks.md.
"""

from later_django.testing.runs import DEFAULT_MAX_JOBS, run_jobs

__all__ = ["DEFAULT_MAX_JOBS", "run_jobs"]
