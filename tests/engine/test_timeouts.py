"""Timeouts in one process: the option and the setting, which one wins, and the
running jobs' bookkeeping at a deadline (the job given up, its late outcome
dropped), and when a batch's start could not be written under its claims
(decision 112: the jobs given up, their outcomes dropped). A job that sleeps past
its timeout under real worker processes is in
``tests/worker/test_timeout_workers.py``."""

from __future__ import annotations

import threading
import time

import pytest

from later_django.compat.tasks import InvalidTask, task
from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.records import JobRecord
from later_django.engine.execution.values import StartedJob, task_timeout_ms
from later_django.worker.bell import Bell
from later_django.worker.jobs import RunningJobs
from tests.engine import tasks

RELEASE = threading.Event()


@task
def wait_for_release() -> str:
    RELEASE.wait(10)
    return "released"


@pytest.mark.parametrize("bad", [0, -1, "30", True, float("nan")])
def test_a_bad_timeout_option_is_refused_naming_the_task_and_the_value(bad) -> None:
    with pytest.raises(InvalidTask) as raised:
        task(timeout=bad)(tasks.add.func)
    message = str(raised.value)
    assert "the timeout option of task tests.engine.tasks.add" in message
    assert repr(bad) in message


def test_the_task_option_wins_over_the_setting() -> None:
    settings = LaterSettings(timeout_seconds=30)
    assert task_timeout_ms(task(timeout=1.5)(tasks.add.func), settings) == 1500
    assert task_timeout_ms(tasks.add, settings) == 30_000
    assert task_timeout_ms(tasks.add, LaterSettings()) is None


def started(deadline_ms: int | None, job_id: str | None = None, sequence: int = 1) -> StartedJob:
    record = JobRecord(
        job_id=job_id or f"01J{deadline_ms}",
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
    return StartedJob(record, wait_for_release, sequence=sequence, deadline_ms=deadline_ms)


def test_a_job_past_its_deadline_is_given_up_and_its_late_outcome_dropped() -> None:
    RELEASE.clear()
    jobs = RunningJobs(concurrency=2, max_jobs=None, wake=Bell())
    late, on_time = started(deadline_ms=1_000), started(deadline_ms=None)
    jobs.launch([late, on_time])
    assert jobs.abandon_past_deadline(999) == []
    assert jobs.abandon_past_deadline(1_000) == [late]
    assert list(jobs.in_flight) == [on_time.record.job_id]
    assert jobs.held() == ([1], [on_time.record.job_id])  # its lease is no longer renewed
    RELEASE.set()
    deadline = time.monotonic() + 10
    while len(jobs.completed) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert [outcome.started for outcome in jobs.completed] == [on_time]
    assert jobs.abandon_past_deadline(10**15) == []
    jobs.shutdown()


def wait_for_outcomes(jobs: RunningJobs, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(jobs.completed) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def test_abandoned_jobs_leave_flight_and_their_outcomes_are_dropped() -> None:
    """``RunningJobs.abandon`` (a batch whose start could not be written under its
    claims): out of flight, not renewed, and an outcome already come is dropped too."""
    RELEASE.clear()
    jobs = RunningJobs(concurrency=3, max_jobs=None, wake=Bell())
    done, running = started(None, "done", 1), started(None, "running", 2)
    kept = started(None, "kept", 3)
    RELEASE.set()
    jobs.launch([done])
    wait_for_outcomes(jobs, 1)
    RELEASE.clear()
    jobs.launch([running, kept])

    jobs.abandon([done, running])

    assert list(jobs.completed) == []
    assert list(jobs.in_flight) == ["kept"]
    assert jobs.held() == ([3], ["kept"])
    RELEASE.set()
    wait_for_outcomes(jobs, 1)
    time.sleep(0.1)
    assert [outcome.started for outcome in jobs.completed] == [kept]
    jobs.shutdown()
