"""Pausing a queue under real ``later_worker`` processes, on both databases: two
workers stop claiming it within a second of the pause, keep running the other
queues, a worker started while it is paused does not claim it either, and the
resume lets its jobs run."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from later_django import api
from tests.worker import tasks
from tests.worker.tasks import read_lines
from tests.worker.test_worker_process import START_SECONDS, Workers, row_of, wait_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: How soon after the pause no claim may take the paused queue (the issue's bound).
OBEYED_WITHIN_SECONDS = 1.0


def started(lines: Path, prefix: str) -> list[dict]:
    return [
        line
        for line in read_lines(lines)
        if str(line["label"]).startswith(prefix) and line["event"] in ("start", "run")
    ]


def test_two_workers_stop_claiming_a_paused_queue_within_a_second(
    alias: str, workers: Workers, lines: Path
) -> None:
    pool = [workers.start(alias, "--concurrency", "1") for _ in range(2)]
    for worker in pool:
        wait_for(lambda w=worker: row_of(alias, w.pid), START_SECONDS, "worker row", workers)
    for number in range(8):
        tasks.sleep_and_record.enqueue(str(lines), f"before-{number}", 0.3)
    wait_for(
        lambda: len({line["pid"] for line in started(lines, "before")}) == 2,
        20,
        "both workers running jobs of the queue",
        workers,
    )

    api.pause_queue("default")
    paused_at = time.time()
    after = []
    while time.time() < paused_at + 2.5:
        after.append(tasks.record.enqueue(str(lines), f"after-{len(after)}"))
        time.sleep(0.05)
    other = tasks.record.using(queue_name="reports").enqueue(str(lines), "other-queue")
    # Its outcome, not only its line: a job writes its line before its outcome.
    wait_for(
        lambda: other.task.get_result(other.id).is_finished, 10, "the other queue's job", workers
    )

    late = [line for line in started(lines, "") if line["at"] > paused_at + OBEYED_WITHIN_SECONDS]
    assert [line["label"] for line in late] == ["other-queue"], late
    # The jobs running at the pause finished; the rest of the queue waits.
    running_at_pause = {line["label"] for line in started(lines, "before")}
    ended = {line["label"] for line in read_lines(lines) if line["event"] == "end"}
    assert running_at_pause and running_at_pause <= ended
    assert len(running_at_pause) < 8, "the pause came before the queue was drained"
    assert other.task.get_result(other.id).status.name == "SUCCESSFUL"

    # A worker started while the queue is paused does not claim it either.
    pool[0].send(signal.SIGTERM)
    assert pool[0].wait_exit(15) == 0, pool[0].describe()
    fresh = workers.start(alias, "--concurrency", "1")
    wait_for(lambda: row_of(alias, fresh.pid), START_SECONDS, "the new worker's row", workers)
    time.sleep(1.5)
    assert started(lines, "after") == []
    assert [queue.name for queue in api.paused_queues()] == ["default"]

    api.resume_queue("default")
    # Their outcomes, not only their lines: a job writes its line before its outcome.
    wait_for(
        lambda: all(r.task.get_result(r.id).is_finished for r in after),
        30,
        "the paused jobs after resume",
        workers,
    )
    assert len(started(lines, "after")) == len(after)
    assert all(r.task.get_result(r.id).status.name == "SUCCESSFUL" for r in after)
    assert fresh.alive() and pool[1].alive()
