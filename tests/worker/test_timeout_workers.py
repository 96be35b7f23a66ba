"""Timeouts under real ``later_worker`` processes, on both databases: a job that
sleeps past its timeout is recorded failed by ``TaskTimeout`` about a second after
its deadline; the process lets its sibling job finish (once), then is replaced (a
single process starts itself again, a supervised child is replaced by its
supervisor), which ends the stuck code; the new process runs new jobs."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from later_django.compat.tasks import TaskResultStatus
from later_django.exceptions import TaskTimeout, class_path
from tests.worker import tasks
from tests.worker.tasks import read_lines
from tests.worker.test_worker_process import (
    START_SECONDS,
    Workers,
    row_of,
    wait_for,
    worker_rows,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: The task's timeout (``@task(timeout=1)``) and how long the stuck code would run.
TIMEOUT_SECONDS = 1.0
STUCK_SECONDS = 4.0
#: "Within about a second of the deadline" (the issue).
RECORDED_WITHIN_SECONDS = 1.0


def events(lines: Path, label: str, name: str) -> list[dict]:
    return [line for line in read_lines(lines) if line["label"] == label and line["event"] == name]


def result(job):  # type: ignore[no-untyped-def]
    return job.task.get_result(job.id)


def run_a_stuck_job_and_its_sibling(alias: str, workers: Workers, lines: Path) -> float:
    """Enqueues the stuck job and a 1.5 s sibling, checks the timeout's outcome;
    returns when the stuck job started."""
    stuck = tasks.sleep_past_timeout.enqueue(str(lines), "stuck", STUCK_SECONDS)
    sibling = tasks.sleep_and_record.enqueue(str(lines), "sibling", 1.5)
    wait_for(lambda: events(lines, "stuck", "start"), 20, "the stuck job started", workers)
    started_at = events(lines, "stuck", "start")[0]["at"]
    wait_for(lambda: result(stuck).is_finished, 10, "the stuck job recorded", workers)
    found = result(stuck)
    assert found.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in found.errors] == [class_path(TaskTimeout)]
    assert "ran past its timeout of 1s" in found.errors[0].traceback
    late = found.finished_at.timestamp() - (started_at + TIMEOUT_SECONDS)
    assert -0.05 < late < RECORDED_WITHIN_SECONDS, late
    wait_for(lambda: result(sibling).is_finished, 20, "the sibling", workers)
    assert result(sibling).status == TaskResultStatus.SUCCESSFUL
    assert len(events(lines, "sibling", "start")) == 1
    return started_at


def the_stuck_code_ended_with_its_process(lines: Path, started_at: float) -> None:
    time.sleep(max(0.0, started_at + STUCK_SECONDS + 0.5 - time.time()))
    assert events(lines, "stuck", "end") == []


def a_new_job_runs(lines: Path, workers: Workers) -> None:
    """A job enqueued now runs, on the process that replaced the stuck one."""
    after = tasks.record.enqueue(str(lines), "after")
    wait_for(lambda: result(after).is_finished, 20, "a job after the replacement", workers)
    assert result(after).status == TaskResultStatus.SUCCESSFUL


def test_a_single_worker_starts_itself_again_after_a_timeout(
    alias: str, workers: Workers, lines: Path
) -> None:
    worker = workers.start(alias, "--concurrency", "2", "--shutdown-timeout", "3")
    first = wait_for(lambda: row_of(alias, worker.pid), START_SECONDS, "worker row", workers)
    started_at = run_a_stuck_job_and_its_sibling(alias, workers, lines)
    # Same pid (os.execv), a new worker: a new row.
    again = wait_for(
        lambda: (
            (row := row_of(alias, worker.pid)) and row["worker_id"] != first["worker_id"] and row
        ),
        START_SECONDS,
        "the worker started again",
        workers,
    )
    assert again["pid"] == worker.pid and worker.alive()
    assert "a job timed out; starting this worker again" in worker.log()
    the_stuck_code_ended_with_its_process(lines, started_at)
    a_new_job_runs(lines, workers)


def test_a_supervised_worker_is_replaced_after_a_timeout(
    alias: str, workers: Workers, lines: Path
) -> None:
    supervisor = workers.start(
        alias, "--processes", "2", "--concurrency", "2", "--shutdown-timeout", "3"
    )
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two children", workers)
    children = {row["pid"] for row in worker_rows(alias)}
    started_at = run_a_stuck_job_and_its_sibling(alias, workers, lines)
    ran_stuck = events(lines, "stuck", "start")[0]["pid"]
    assert ran_stuck in children
    wait_for(
        lambda: (
            ran_stuck not in {r["pid"] for r in worker_rows(alias)} and len(worker_rows(alias)) == 2
        ),
        START_SECONDS,
        "the child replaced",
        workers,
    )
    assert supervisor.alive()
    assert "asked to be replaced; starting another" in supervisor.log()
    the_stuck_code_ended_with_its_process(lines, started_at)
    a_new_job_runs(lines, workers)


def test_a_timeout_during_a_stop_is_recorded_and_the_worker_still_exits(
    alias: str, workers: Workers, lines: Path
) -> None:
    """SIGTERM first, then the deadline passes while the worker drains: the job is
    recorded failed by ``TaskTimeout``, and the worker exits 0 rather than starting
    itself again (the stop was asked for)."""
    worker = workers.start(alias, "--concurrency", "2", "--shutdown-timeout", "10")
    wait_for(lambda: row_of(alias, worker.pid), START_SECONDS, "worker row", workers)
    stuck = tasks.sleep_past_timeout.enqueue(str(lines), "stuck", STUCK_SECONDS)
    wait_for(lambda: events(lines, "stuck", "start"), 20, "the stuck job started", workers)
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(8) == 0, worker.describe()
    found = result(stuck)
    assert found.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in found.errors] == [class_path(TaskTimeout)]
    assert "starting this worker again" not in worker.log()
