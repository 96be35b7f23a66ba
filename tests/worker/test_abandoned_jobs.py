"""``RunningJobs.abandon``: the jobs of a batch whose start could not be written under
its claims (decision 112) leave flight, and their outcomes, come or to come, are
dropped. No database."""

from __future__ import annotations

import threading
import time

from later_django.compat.tasks import task
from later_django.core import stages
from later_django.core.records import JobRecord
from later_django.engine.execution import StartedJob
from later_django.worker.bell import Bell
from later_django.worker.jobs import RunningJobs

RELEASE = threading.Event()


@task
def wait_for_release() -> str:
    RELEASE.wait(10)
    return "released"


def started(job_id: str, sequence: int) -> StartedJob:
    record = JobRecord(
        job_id=job_id,
        namespace="ns",
        task_path=wait_for_release.module_path,
        args=[],
        kwargs={},
        queue_name="default",
        priority=0,
        backend="default",
        stage=stages.RUNNING,
        stage_at_ms=1,
        created_at_ms=1,
    )
    return StartedJob(record, wait_for_release, sequence=sequence)


def wait_for_outcomes(jobs: RunningJobs, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(jobs.completed) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def test_abandoned_jobs_leave_flight_and_their_outcomes_are_dropped() -> None:
    RELEASE.clear()
    jobs = RunningJobs(concurrency=3, max_jobs=None, wake=Bell())
    done, running, kept = started("done", 1), started("running", 2), started("kept", 3)
    RELEASE.set()
    jobs.launch([done])
    wait_for_outcomes(jobs, 1)
    RELEASE.clear()
    jobs.launch([running, kept])

    jobs.abandon([done, running])

    # The outcome that had come already is gone too; nothing of theirs is renewed.
    assert list(jobs.completed) == []
    assert list(jobs.in_flight) == ["kept"]
    assert jobs.held() == ([3], ["kept"])
    RELEASE.set()
    wait_for_outcomes(jobs, 1)
    time.sleep(0.1)
    assert [outcome.started for outcome in jobs.completed] == [kept]
    jobs.shutdown()
