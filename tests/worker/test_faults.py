"""Faults a real ``later_worker`` must ride out: signals at any moment, a database that
vanishes between a claim and its start, children that die, a supervisor that dies.

Each test starts real processes (see :mod:`tests.worker.test_worker_process`) and
checks what an operator would see: the process exits within its shutdown timeout,
no message waits for its lease, replacements come at once, no orphan lives on.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResult
from tests.worker import tasks
from tests.worker.tasks import read_lines
from tests.worker.test_worker_process import (
    START_SECONDS,
    Workers,
    all_successful,
    delivery_rows,
    events,
    fetch,
    finished,
    session_members,
    wait_for,
    worker_rows,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

SIGTERMS = 300
SHUTDOWN_TIMEOUT = 5.0
#: How long past its shutdown timeout a signalled process may take to be gone
#: (logging, the final writes, the supervisor reaping it).
EXIT_MARGIN = 2.0


def children_of(supervisor: int) -> set[int]:
    """The live worker processes a supervisor forked (the supervisor left out)."""
    return set(session_members(supervisor)) - {supervisor}


def wait_gone(pid: int, supervisor: int, timeout: float, workers: Workers) -> float:
    """Seconds until ``pid`` is no longer a live member of the supervisor's session."""
    started = time.monotonic()
    wait_for(lambda: pid not in session_members(supervisor), timeout, f"pid {pid} gone", workers)
    return time.monotonic() - started


def test_children_stop_within_the_shutdown_timeout_on_sigterm_at_any_moment(
    alias: str, workers: Workers, lines: Path
) -> None:
    """300 SIGTERMs, to the children of a ``--processes 2`` worker under load, at
    random moments (starting up, idle, claiming, running jobs): every child stops
    within its shutdown timeout, and every job runs exactly once."""
    supervisor = workers.start(
        alias,
        "--processes",
        "2",
        "--concurrency",
        "4",
        "--shutdown-timeout",
        str(SHUTDOWN_TIMEOUT),
    )
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two worker rows", workers)
    randomness = random.Random(20261201)
    jobs: list[TaskResult] = []
    slowest = 0.0
    signalled = 0
    while signalled < SIGTERMS:
        if signalled % 10 == 0:
            # Jobs that hold the GIL: the main thread then loses it inside its waits
            # (where an Event's lock is held), the moments a stop signal is riskiest.
            calls = [((str(lines), len(jobs) + n, 0.02), {}) for n in range(20)]
            jobs += enqueue_many(tasks.spin_and_record, calls)
        targets = sorted(wait_for(lambda: children_of(supervisor.pid), 5, "children", workers))
        time.sleep(randomness.uniform(0, 0.25))
        for pid in targets:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pytest.fail(f"child {pid} died before its SIGTERM\n{supervisor.describe()}")
        signalled += len(targets)
        for pid in targets:
            took = wait_gone(pid, supervisor.pid, SHUTDOWN_TIMEOUT + EXIT_MARGIN, workers)
            slowest = max(slowest, took)
    assert supervisor.alive(), supervisor.describe()

    supervisor.send(signal.SIGTERM)
    assert supervisor.wait_exit(SHUTDOWN_TIMEOUT + EXIT_MARGIN) == 0, supervisor.describe()
    assert session_members(supervisor.pid) == []
    rest = workers.start(alias, "--burst")
    assert rest.wait_exit(START_SECONDS) == 0, rest.describe()
    assert all_successful(jobs), workers.logs()
    runs = Counter(line["label"] for line in read_lines(lines))
    assert sorted(runs) == list(range(len(jobs)))
    assert [label for label, count in runs.items() if count > 1] == []
    assert slowest < SHUTDOWN_TIMEOUT + EXIT_MARGIN


def test_messages_claimed_before_the_database_vanished_are_handed_back_when_it_returns(
    alias: str, workers: Workers, lines: Path
) -> None:
    """The start of a claim fails (connection killed, database refusing connections
    or locked) and so does the immediate hand-back: the messages are handed back as
    soon as the database answers, not left waiting for their 30 s leases."""
    jobs = enqueue_many(tasks.record, [((str(lines), n), {}) for n in range(4)])
    worker = workers.start(
        alias,
        "--lease-seconds",
        "30",
        module="tests.worker.cut_off_worker",
        # SQLite: the worker gives up on the lock after 0.3 s, so it sees the outage.
        database_options={"timeout": 0.3} if alias == "default" else None,
        environment={"LATER_CUT_OFF_SECONDS": "2"},
    )
    wait_for(lambda: "cut off the database" in worker.log(), START_SECONDS, "cut off", workers)
    cut_at = time.monotonic()

    # Database back after 2 s; back-off at most doubles past that: far below 30 s.
    wait_for(lambda: all_successful(jobs), 10, "every claimed job ran", workers)
    assert time.monotonic() - cut_at < 10
    log = worker.log()
    # enqueue_many publishes the batch as one message.
    assert "could not hand back 1 message(s) yet" in log, worker.describe()
    assert "handed back 1 unstarted message(s)" in log, worker.describe()
    assert "leases will lapse" not in log
    assert sorted(line["label"] for line in read_lines(lines)) == [0, 1, 2, 3]
    for job in jobs:
        assert finished(job).attempts == 1
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0, worker.describe()
    assert delivery_rows(alias) == []


def test_two_children_killed_100_ms_apart_are_both_replaced_within_a_second(
    alias: str, workers: Workers
) -> None:
    supervisor = workers.start(alias, "--processes", "2", "--concurrency", "2")
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two worker rows", workers)
    first, second = sorted(children_of(supervisor.pid))

    os.kill(first, signal.SIGKILL)
    time.sleep(0.1)
    os.kill(second, signal.SIGKILL)
    killed_at = time.monotonic()
    replacements = wait_for(
        lambda: (
            len(children_of(supervisor.pid) - {first, second}) == 2
            and children_of(supervisor.pid) - {first, second}
        ),
        5,
        "two replacement processes",
        workers,
    )
    assert time.monotonic() - killed_at < 1.0, supervisor.describe()
    wait_for(
        lambda: replacements <= {row["pid"] for row in worker_rows(alias)},
        START_SECONDS,
        "the replacements' worker rows",
        workers,
    )
    assert supervisor.log().count("exited with -9; starting another") == 2
    supervisor.send(signal.SIGTERM)
    assert supervisor.wait_exit(20) == 0, supervisor.describe()
    assert session_members(supervisor.pid) == []


def test_children_of_a_sigkilled_supervisor_hand_back_their_jobs_and_exit(
    alias: str, workers: Workers, lines: Path
) -> None:
    """SIGKILL to the supervisor's process group (as a process manager does) leaves no
    child running: an idle child exits at once, a busy one within the orphan's grace,
    handing back the job it still runs."""
    supervisor = workers.start(alias, "--processes", "2", "--concurrency", "1")
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two worker rows", workers)
    job = tasks.sleep_and_record.enqueue(str(lines), "long", 60)
    wait_for(lambda: events(lines, "start"), START_SECONDS, "long job started", workers)
    busy = events(lines, "start")[0]["pid"]
    (idle,) = children_of(supervisor.pid) - {busy}

    os.killpg(supervisor.pid, signal.SIGKILL)
    assert supervisor.wait_exit(5) == -signal.SIGKILL
    idle_took = wait_gone(idle, supervisor.pid, 5, workers)
    busy_took = wait_gone(busy, supervisor.pid, 10, workers)

    assert idle_took < 3, workers.logs()
    assert session_members(supervisor.pid) == []
    assert busy_took < 10
    assert events(lines, "end") == []
    # Handed back at once (not left to the 30 s lease), its lease lapsed for the next worker.
    assert delivery_rows(alias) == [(None, None)]
    assert fetch(
        alias,
        "SELECT count(*) FROM later_job_execution WHERE job_id = %s AND lease_until > %s",
        [job.id, int(time.time() * 1000)],
    ) == [(0,)]
    log = supervisor.log()
    assert log.count(f"supervisor {supervisor.pid} is gone") == 2, log
    assert worker_rows(alias) == []


def test_a_stop_signal_at_any_line_of_the_main_threads_waits_stops_the_worker(
    alias: str, tmp_path: Path
) -> None:
    """Deterministic: SIGTERM raised at each Python line inside the worker's waits
    (its wake-up and its stop back-off), so the handler runs wherever the wait's
    own locks stand. A handler that takes a lock the wait holds (Event.set inside
    Event.wait) hangs here, instead of once in a few hundred real signals."""
    workers = Workers(tmp_path)
    probe = workers.start(alias, module="tests.worker.signal_during_wait")
    try:
        code = probe.process.wait(60)
    except subprocess.TimeoutExpired:
        probe.kill()
        pytest.fail(f"a signal inside a wait hung the worker\n{probe.describe()}")
    assert code == 0, probe.describe()
    cases = int(probe.log().split("ok ")[-1])
    assert cases >= 8, probe.describe()
