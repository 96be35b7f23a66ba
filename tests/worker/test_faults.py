"""Faults a real ``later_worker`` must ride out: signals at any moment, a database that
vanishes between a claim and its start, children that die, a supervisor that dies.

Each test starts real processes (see :mod:`tests.worker.test_worker_process`) and
checks what an operator would see: the process exits within its shutdown timeout,
no message waits for its lease, replacements come at once, no orphan lives on.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connections, transaction
from django.test import override_settings

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResult
from later_django.conf import later_settings
from later_django.core import stages
from later_django.engine.execution.lost import record_lost_attempts
from later_django.engine.execution.start import start_batch
from later_django.storage.stores import stores_for
from later_django.worker.process import HAND_BACK_SECONDS
from tests.partitions import tasks as partition_tasks
from tests.partitions.conftest import TOPIC, TOPICS
from tests.worker import tasks
from tests.worker.tasks import read_lines
from tests.worker.test_worker_process import (
    IMMEDIATE_RETRIES,
    NAMESPACE,
    START_SECONDS,
    Workers,
    all_successful,
    delivery_rows,
    events,
    fetch,
    finished,
    record_of,
    session_members,
    wait_for,
    wait_started,
    worker_rows,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: 150 signals take about 30 s here; the race they once caught (a replacement forked
#: after the supervisor's stop) has a deterministic test of its own
#: (test_supervisor_start.py); 300 doubled this test's time for the suite's budget.
SIGTERMS = 150
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
    """150 SIGTERMs, to the children of a ``--processes 2`` worker under load, at
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
    """The database goes away right after a claim (connection killed, database
    refusing connections, or locked): the start fails (PostgreSQL: the plan, which
    reads the job's record; SQLite, whose readers still read: the start write) and so
    does the immediate hand-back; the message is handed back as soon as the database
    answers, not left waiting for its 30 s lease. A message that is not a job is
    dropped."""
    jobs = enqueue_many(tasks.record, [((str(lines), n), {}) for n in range(4)])
    stores_for(alias).queue.publish(NAMESPACE, "default", [b"\xc1 not a command"])
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
    assert "cut off the database for 2.0s after claiming 1" in log, worker.describe()
    assert "could not hand back 1 message(s) yet" in log, worker.describe()
    assert "handed back 1 unstarted message(s)" in log, worker.describe()
    assert "leases will lapse" not in log
    assert sorted(line["label"] for line in read_lines(lines)) == [0, 1, 2, 3]
    for job in jobs:
        assert finished(job).attempts == 1
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0, worker.describe()
    assert delivery_rows(alias) == []


def test_a_batch_whose_start_write_fails_is_written_or_handed_back_when_it_returns(
    alias: str, workers: Workers, lines: Path
) -> None:
    """The database goes away after the batch is planned, just before its start
    write (decision 112). PostgreSQL: the jobs already run; the start is written
    again, under the batch's claims, once the database answers, then the outcomes.
    SQLite: no job is on a thread yet; the batch is handed back once the database
    answers. Either way every job ran once, as attempt 1."""
    jobs = enqueue_many(tasks.record, [((str(lines), n), {}) for n in range(4)])
    worker = workers.start(
        alias,
        "--lease-seconds",
        "30",
        module="tests.worker.cut_off_worker",
        database_options={"timeout": 0.3} if alias == "default" else None,
        environment={"LATER_CUT_OFF_SECONDS": "2", "LATER_CUT_OFF_AT": "start_write"},
    )
    wait_for(lambda: "cut off the database" in worker.log(), START_SECONDS, "cut off", workers)
    cut_at = time.monotonic()

    wait_for(lambda: all_successful(jobs), 10, "every claimed job ran", workers)
    assert time.monotonic() - cut_at < 10
    log = worker.log()
    # Four ready, fewer than a batch: the first claim takes one (migration 0003).
    assert "before the start write of 1" in log, worker.describe()
    assert "gave up" not in log, worker.describe()
    if alias == "default":
        assert "handed back 1 unstarted message(s)" in log, worker.describe()
    else:
        assert "wrote a batch's start once the database answered (1 job(s) running)" in log
        assert "unstarted message(s)" not in log, worker.describe()
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
    wait_started(job, lines, "long job started", workers)
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


def test_second_sigterm_hands_the_running_job_back_as_lost_and_it_runs_again_at_once(
    alias: str, workers: Workers, lines: Path
) -> None:
    """Two SIGTERMs to a worker running a long job (30 s leases): it exits within a
    second or two, having recorded the attempt as ``WorkerLost`` itself, so another
    worker runs the retry at once rather than after the lease lapses."""
    first = workers.start(alias, "--concurrency", "1", later=IMMEDIATE_RETRIES)
    job = tasks.sleep_on_first_attempt.enqueue(str(lines), "long", 60)
    wait_started(job, lines, "first attempt started", workers)
    second = workers.start(alias, "--concurrency", "1", later=IMMEDIATE_RETRIES)
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two worker rows", workers)

    first.send(signal.SIGTERM)
    wait_for(lambda: "finishing running jobs" in first.log(), 5, "first signal handled", workers)
    first.send(signal.SIGTERM)
    signalled, signalled_at = time.monotonic(), time.time()
    code = first.wait_exit(5)

    assert code == 1, first.describe()
    assert time.monotonic() - signalled < 3, first.describe()
    done = wait_for(lambda: finished(job), 10, "the retry finished", workers)
    assert done.return_value == 2, workers.logs()
    assert done.attempts == 2
    assert f":{first.pid}:" in done.worker_ids[0]
    assert f":{second.pid}:" in done.worker_ids[1]
    (lost,) = done.errors
    assert lost.exception_class_path == "later_django.exceptions.WorkerLost"
    assert done.worker_ids[0] in lost.traceback and "second signal" in lost.traceback
    starts = events(lines, "start")
    assert [(line["attempt"], line["pid"]) for line in starts] == [
        (1, first.pid),
        (2, second.pid),
    ]
    # Well before the 30 s lease would have lapsed.
    assert starts[1]["at"] - signalled_at < 5, workers.logs()
    assert [line["attempt"] for line in events(lines, "end")] == [2]
    assert "handed back 1 running job(s) as lost (WorkerLost)" in first.log(), first.describe()
    second.send(signal.SIGTERM)
    assert second.wait_exit(15) == 0, second.describe()
    assert delivery_rows(alias) == []


def test_a_lost_attempt_is_recorded_once_and_only_while_its_lease_is_held(alias: str) -> None:
    """The hand-back's fence: a second hand-back of the same attempt, or one by a
    worker whose execution lease is gone, changes nothing."""
    stores, settings = stores_for(alias), later_settings()
    for label in ("kept", "taken"):
        tasks.record.enqueue("unused", label)
    messages = stores.queue.claim(NAMESPACE, ["default"], "w1", 30_000, batch_size=2)
    started = start_batch(
        messages,
        stores=stores,
        namespace=NAMESPACE,
        worker_id="w1",
        lease_ms=30_000,
        settings=settings,
    )
    kept, taken = sorted(started, key=lambda job: job.record.args[1] != "kept")
    # The second job's lease is no longer w1's (as when another worker took it over).
    stores.executions.lease_release_many(NAMESPACE, "w1", [taken.record.job_id])

    def hand_back() -> list:
        return record_lost_attempts(
            started,
            stores=stores,
            namespace=NAMESPACE,
            worker_id="w1",
            settings=settings,
            why="w1 stopped",
        )

    (written,) = hand_back()
    assert hand_back() == []

    assert written.job_id == kept.record.job_id
    record = record_of(alias, kept.record.job_id)
    assert record.stage in (stages.REQUEUED, stages.ENQUEUED)
    assert [error.exception_class_path for error in record.errors] == [
        "later_django.exceptions.WorkerLost"
    ]
    assert record.errors[0].traceback == "w1 stopped"
    assert record_of(alias, taken.record.job_id).stage == stages.RUNNING
    assert stores.executions.lease_get_many(NAMESPACE, [kept.record.job_id]) == {}


def test_second_sigterm_exits_within_the_hand_back_bound_when_the_database_does_not_answer(
    alias: str, workers: Workers, lines: Path
) -> None:
    """The running job's execution lease is locked by another transaction (SQLite:
    the database's write lock; PostgreSQL: the lease row), so the hand-back blocks:
    the worker exits all the same, with status 1, once HAND_BACK_SECONDS passed,
    and nothing was written (the lease lapses as before)."""
    worker = workers.start(
        alias,
        "--concurrency",
        "1",
        # SQLite: the worker would wait 20 s for the lock, far past the bound.
        database_options={"timeout": 20} if alias == "default" else None,
    )
    job = tasks.sleep_and_record.enqueue(str(lines), "long", 60)
    wait_started(job, lines, "long job started", workers)
    worker.send(signal.SIGTERM)
    wait_for(lambda: "finishing running jobs" in worker.log(), 5, "first signal handled", workers)

    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        cursor.execute(
            "UPDATE later_job_execution SET lease_until = lease_until "
            "WHERE namespace = %s AND job_id = %s",
            [NAMESPACE, job.id],
        )
        worker.send(signal.SIGTERM)
        signalled = time.monotonic()
        code = worker.wait_exit(10)
        took = time.monotonic() - signalled

    assert code == 1, worker.describe()
    assert HAND_BACK_SECONDS - 0.5 < took < HAND_BACK_SECONDS + EXIT_MARGIN, worker.describe()
    assert "hand-back not done in time; exiting" in worker.log(), worker.describe()
    assert "handed back 1 running job(s)" not in worker.log()
    assert record_of(alias, job.id).stage == stages.RUNNING
    (owner,) = fetch(
        alias,
        "SELECT owner FROM later_job_execution WHERE namespace = %s AND job_id = %s",
        [NAMESPACE, job.id],
    )
    assert f":{worker.pid}:" in owner[0]


def test_second_sigterm_hands_back_a_partition_job_and_its_partition(
    alias: str, workers: Workers, lines: Path
) -> None:
    """A job on a topic partition: the second signal records its attempt lost and
    gives up the partition leases, so a new worker takes the partition and starts
    the retry at once, not after the 30 s leases (execution and partition) lapse."""
    later = {"TOPICS": TOPICS, **IMMEDIATE_RETRIES}
    first = workers.start(alias, "--concurrency", "1", later=later)
    wait_for(lambda: partition_owners(alias), START_SECONDS, "partitions held", workers)
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": alias, "TOPICS": TOPICS}):
        backend = partition_tasks.slow_record_key.get_backend()
        new = backend.new_job(partition_tasks.slow_record_key, [str(lines), "k", 0, 60], {})
        (job,) = backend.write_jobs(
            [partition_tasks.slow_record_key],
            [dataclasses.replace(new, topic=TOPIC, partition_key="k")],
        )
    wait_for(lambda: events(lines, "start"), START_SECONDS, "the partition job started", workers)

    first.send(signal.SIGTERM)
    wait_for(lambda: "finishing running jobs" in first.log(), 5, "first signal handled", workers)
    first.send(signal.SIGTERM)
    signalled_at = time.time()
    assert first.wait_exit(5) == 1, first.describe()

    assert time.time() - signalled_at < 3, first.describe()
    record = record_of(alias, job.id)
    assert record.stage in (stages.REQUEUED, stages.ENQUEUED), first.describe()
    assert [error.exception_class_path for error in record.errors] == [
        "later_django.exceptions.WorkerLost"
    ]
    assert partition_owners(alias) == set(), first.describe()
    # Its row is gone too, so the next worker counts no one else live and takes it all.
    assert worker_rows(alias) == []
    second = workers.start(alias, "--concurrency", "1", later=later)
    starts = wait_for(
        lambda: len(events(lines, "start")) == 2 and events(lines, "start"),
        START_SECONDS,
        "the retry started on the next worker",
        workers,
    )
    assert [line["pid"] for line in starts] == [first.pid, second.pid]
    assert starts[1]["at"] - signalled_at < 15, workers.logs()
    second.send(signal.SIGTERM)
    wait_for(lambda: "finishing running jobs" in second.log(), 5, "second worker stopping", workers)
    second.send(signal.SIGTERM)
    assert second.wait_exit(5) == 1, second.describe()


def partition_owners(alias: str) -> set[str]:
    """The workers holding a live lease on a partition of the test topic."""
    rows = fetch(
        alias,
        "SELECT DISTINCT owner FROM later_partition_lease WHERE namespace = %s AND topic = %s "
        "AND owner IS NOT NULL AND lease_until > %s",
        [NAMESPACE, TOPIC, int(time.time() * 1000)],
    )
    return {owner for (owner,) in rows}
