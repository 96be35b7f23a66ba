"""Cancelling running jobs under a real ``later_worker`` process, on both databases:
a cooperative task sees ``context.cancelled`` within a second and stops through
``check_cancelled``; a task that ignores the request runs to its end and is still
recorded cancelled; a sibling job on the same worker is unharmed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from later_django import api
from later_django.compat.tasks import TaskResultStatus
from later_django.core.keys import cancel_request_bounds
from later_django.exceptions import JobCancelled, class_path
from later_django.storage.stores import stores_for
from tests.worker import tasks
from tests.worker.tasks import read_lines
from tests.worker.test_worker_process import (
    NAMESPACE,
    START_SECONDS,
    Workers,
    row_of,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: The issue's bound: a request reaches the running job within a second.
REACHES_WITHIN_SECONDS = 1.0


def event(lines: Path, label: str, name: str) -> dict | None:
    return next(
        (line for line in read_lines(lines) if line["label"] == label and line["event"] == name),
        None,
    )


def finished(job):  # type: ignore[no-untyped-def]
    return job.task.get_result(job.id).is_finished


def test_a_running_job_is_cancelled_cooperatively_or_not(
    alias: str, workers: Workers, lines: Path
) -> None:
    worker = workers.start(alias, "--concurrency", "3")
    wait_for(lambda: row_of(alias, worker.pid), START_SECONDS, "worker row", workers)
    cooperative = tasks.wait_for_cancel.enqueue(str(lines), "cooperative", 30)
    ignoring = tasks.sleep_and_record.enqueue(str(lines), "ignoring", 2.0)
    sibling = tasks.sleep_and_record.enqueue(str(lines), "sibling", 1.0)
    for label in ("cooperative", "ignoring", "sibling"):
        wait_for(lambda label=label: event(lines, label, "start"), 20, f"{label} started", workers)

    requested_at = time.time()
    assert api.cancel(cooperative.id) == api.REQUESTED
    assert api.cancel(ignoring.id) == api.REQUESTED
    seen = wait_for(lambda: event(lines, "cooperative", "saw cancel"), 10, "the flag", workers)
    assert seen["at"] - requested_at < REACHES_WITHIN_SECONDS

    wait_for(
        lambda: all(finished(j) for j in (cooperative, ignoring, sibling)), 20, "ends", workers
    )
    for job in (cooperative, ignoring):
        found = job.task.get_result(job.id)
        assert found.status == TaskResultStatus.FAILED
        assert [e.exception_class_path for e in found.errors] == [class_path(JobCancelled)]
    # The one that ignored the request ran to its end; its return value is not kept.
    assert event(lines, "ignoring", "end") is not None
    assert event(lines, "cooperative", "end") is None
    assert sibling.task.get_result(sibling.id).status == TaskResultStatus.SUCCESSFUL
    assert sibling.task.get_result(sibling.id).return_value == "sibling"
    assert worker.alive()
    # The requests went with the outcomes.
    start, stop = cancel_request_bounds(NAMESPACE)
    assert stores_for(alias).kv.key_scan(start, stop, 10) == []
    assert api.cancel(cooperative.id) == api.FINISHED
