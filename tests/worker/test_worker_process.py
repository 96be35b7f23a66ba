"""The worker as a real process: ``python -m django later_worker`` against the test databases.

Each test starts ``later_worker`` subprocesses (settings
:mod:`tests.worker.worker_settings`, pointed at the SQLite file or PostgreSQL
test database this test runs on), enqueues jobs of :mod:`tests.worker.tasks`
from the test process, and watches the jobs' records, the queue tables and
the lines the tasks write. Every wait has a deadline; the ``workers`` fixture
kills whatever a test leaves running, including the children of a supervisor.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.test import override_settings

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResult, TaskResultDoesNotExist, TaskResultStatus
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import job_key, undecodable_key
from later_django.core.records import JobRecord, decode_record, encode_record
from later_django.engine import metrics
from later_django.storage.stores import stores_for
from tests.worker import tasks
from tests.worker.tasks import read_lines

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

REPOSITORY = Path(__file__).resolve().parents[2]
NAMESPACE = "default"
IMMEDIATE_RETRIES = {"RETRY": {"max_retries": 3, "backoff": "immediate"}}
#: Deadline of a wait that includes starting a worker process (Django start-up).
START_SECONDS = 30.0


# --- worker processes ---


def database_settings(alias: str) -> dict[str, Any]:
    """The connection settings of ``alias`` as the test sees them (pytest-django has
    already switched ``NAME`` to the test database)."""
    source = settings.DATABASES[alias]
    keys = ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS")
    return {key: source[key] for key in keys if key in source}


def session_members(session_id: int) -> list[int]:
    """Pids of the live processes of session ``session_id`` (a worker started with
    ``start_new_session`` and every process it forked, even after it died)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        # fields: state, ppid, pgrp, session, ...; zombies are already dead.
        if int(fields[3]) == session_id and fields[0] != "Z":
            members.append(int(entry.name))
    return members


class WorkerProcess:
    """One ``later_worker`` subprocess; its stdout and stderr go to ``log_path``."""

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path, options: tuple) -> None:
        self.process = process
        self.log_path = log_path
        self.options = options

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def describe(self) -> str:
        state = "running" if self.alive() else f"exited {self.process.returncode}"
        return (
            f"--- later_worker {' '.join(self.options)} (pid {self.pid}, {state}) ---\n{self.log()}"
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            pytest.fail(f"worker still running after {timeout} s\n{self.describe()}")

    def dump_stacks(self) -> None:
        """Every thread's stack of every live process of the worker's session into
        its log (``faulthandler`` on SIGUSR1, see ``worker_settings``): what a
        process that does not exit is doing."""
        for pid in session_members(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
        time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL to the worker and every process of its session."""
        for pid in {self.pid, *session_members(self.pid)}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(10)


class Workers:
    """Starts ``later_worker`` subprocesses on a test database; kills leftovers."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[WorkerProcess] = []

    def start(
        self,
        alias: str,
        *options: str,
        later: dict[str, Any] | None = None,
        module: str = "django later_worker",
        database_options: dict[str, Any] | None = None,
        environment: dict[str, str] | None = None,
        database: dict[str, Any] | None = None,
    ) -> WorkerProcess:
        """``python -m <module> <options>`` (by default ``later_worker``) on ``alias``
        (or on the connection settings ``database``, a server of the test's own);
        ``database_options`` are merged into the alias's ``OPTIONS``."""
        database = dict(database) if database is not None else database_settings(alias)
        database["OPTIONS"] = {**database.get("OPTIONS", {}), **(database_options or {})}
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.worker.worker_settings",
            "PYTHONPATH": str(REPOSITORY),
            "PYTHONUNBUFFERED": "1",
            "LATER_WORKER_DATABASE": json.dumps(database),
            "LATER_WORKER_LATER": json.dumps(later or {}),
            # tests.settings would otherwise make (and leave) a temporary directory.
            "LATER_TEST_SQLITE_DIR": str(settings.SQLITE_DIRECTORY),
            **(environment or {}),
        }
        log_path = self.directory / f"worker-{len(self.started)}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", *module.split(), *options],
                env=env,
                cwd=REPOSITORY,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = WorkerProcess(process, log_path, options)
        self.started.append(worker)
        return worker

    def logs(self) -> str:
        return "\n".join(worker.describe() for worker in self.started)

    def dump_stacks(self) -> None:
        for worker in self.started:
            worker.dump_stacks()

    def kill_all(self) -> None:
        for worker in self.started:
            if worker.alive() or session_members(worker.pid):
                worker.kill()


@contextlib.contextmanager
def later_on(alias: str) -> Iterator[str]:
    """``LATER`` of the test process on ``alias``; at the end the metric samples its
    enqueues gathered are written while the test database exists (else the
    process's exit flush would try a database that is gone)."""
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": alias}):
        yield alias
        metrics.flush()


# --- waiting and reading ---


def wait_for(
    condition: Callable[[], Any], timeout: float, what: str, workers: Workers | None = None
) -> Any:
    """Calls ``condition`` until it returns something truthy; fails after ``timeout``
    seconds with the workers' logs."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            logs = ""
            if workers is not None:
                workers.dump_stacks()
                logs = workers.logs()
            pytest.fail(f"{what}: not within {timeout} s\n{logs}")
        time.sleep(0.05)


def result_of(result: TaskResult) -> TaskResult:
    return result.task.get_result(result.id)


def status_of(result: TaskResult) -> TaskResultStatus:
    return result_of(result).status


def finished(result: TaskResult) -> TaskResult | None:
    fresh = result_of(result)
    done = (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
    return fresh if fresh.status in done else None


def all_successful(results: list[TaskResult]) -> bool:
    return all(status_of(result) == TaskResultStatus.SUCCESSFUL for result in results)


def record_of(alias: str, job_id: str) -> JobRecord:
    raw = stores_for(alias).kv.get(job_key(NAMESPACE, job_id))
    assert raw is not None, f"job {job_id} has no record"
    return decode_record(raw)


def fetch(alias: str, sql: str, params: list[Any] | None = None) -> list[tuple]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params or [])
        return list(cursor.fetchall())


def index_stage(alias: str, job_id: str) -> str | None:
    rows = fetch(
        alias,
        "SELECT stage FROM later_jobs_index WHERE namespace = %s AND job_id = %s",
        [NAMESPACE, job_id],
    )
    return rows[0][0] if rows else None


def delivery_rows(alias: str, queue_name: str = "default") -> list[tuple[str | None, Any]]:
    """``(lease_owner, lease_until)`` of every message of ``queue_name``."""
    return fetch(
        alias,
        "SELECT lease_owner, lease_until FROM later_delivery_queue "
        "WHERE namespace = %s AND queue_name = %s",
        [NAMESPACE, queue_name],
    )


def worker_rows(alias: str) -> list[dict[str, Any]]:
    rows = fetch(
        alias,
        "SELECT worker_id, pid, queues, busy, heartbeat_at FROM later_worker WHERE namespace = %s",
        [NAMESPACE],
    )
    return [
        {"worker_id": w, "pid": int(p), "queues": json.loads(q), "busy": int(b), "heartbeat_at": h}
        for w, p, q, b, h in rows
    ]


def row_of(alias: str, pid: int) -> dict[str, Any] | None:
    return next((row for row in worker_rows(alias) if row["pid"] == pid), None)


def row_where(
    alias: str, pid: int, condition: Callable[[dict[str, Any]], bool]
) -> Callable[[], dict[str, Any] | None]:
    """A ``wait_for`` condition: the row of worker ``pid`` once it meets ``condition``."""

    def look() -> dict[str, Any] | None:
        row = row_of(alias, pid)
        return row if row is not None and condition(row) else None

    return look


def wait_started(job: TaskResult, lines: Path, what: str, workers: Workers) -> None:
    """Waits until the job's task wrote its ``start`` line and its start is on record
    (``running``): on PostgreSQL a task begins while its start is being written
    (decision 112), so a test that then acts on the running job waits for both."""
    wait_for(
        lambda: events(lines, "start") and status_of(job) == TaskResultStatus.RUNNING,
        START_SECONDS,
        what,
        workers,
    )


def events(path: Path, event: str, label: Any = None) -> list[dict[str, Any]]:
    return [
        line
        for line in read_lines(path)
        if line["event"] == event and (label is None or line["label"] == label)
    ]


def rewrite_task_path(alias: str, job_id: str, task_path: str) -> None:
    record = record_of(alias, job_id)
    record.task_path = task_path
    stores_for(alias).kv.set(job_key(NAMESPACE, job_id), encode_record(record))


# --- the tests ---


def test_committed_job_is_run_by_a_worker_process_and_rolled_back_job_never_runs(
    alias: str, workers: Workers, lines: Path
) -> None:
    worker = workers.start(alias, "--concurrency", "2")

    class RolledBack(Exception):
        pass

    with pytest.raises(RolledBack), transaction.atomic(using=alias):
        rolled_back = tasks.record.enqueue(str(lines), "rolled back")
        raise RolledBack
    committed = tasks.record.enqueue(str(lines), "committed")

    done = wait_for(lambda: finished(committed), START_SECONDS, "committed job finished", workers)
    assert done.status == TaskResultStatus.SUCCESSFUL, workers.logs()
    assert done.return_value == "committed"
    assert len(done.worker_ids) == 1
    assert f":{worker.pid}:" in done.worker_ids[0]
    with pytest.raises(TaskResultDoesNotExist):
        tasks.record.get_result(rolled_back.id)

    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0, worker.describe()
    ran = read_lines(lines)
    assert [(line["label"], line["pid"]) for line in ran] == [("committed", worker.pid)]
    assert delivery_rows(alias) == []


def test_job_of_a_sigkilled_worker_runs_again_on_another_worker_after_the_lease_lapses(
    alias: str, workers: Workers, lines: Path
) -> None:
    first = workers.start(alias, "--lease-seconds", "1", later=IMMEDIATE_RETRIES)
    job = tasks.sleep_on_first_attempt.enqueue(str(lines), "job", 5)
    # A start on record (a kill before it is the second delivery's case:
    # test_a_job_that_ends_its_process_at_once_fails_after_its_retries).
    wait_started(job, lines, "first attempt started", workers)
    first.send(signal.SIGKILL)
    assert first.wait_exit(5) == -signal.SIGKILL
    assert status_of(job) == TaskResultStatus.RUNNING

    second = workers.start(alias, "--lease-seconds", "1", later=IMMEDIATE_RETRIES)
    done = wait_for(
        lambda: finished(job), START_SECONDS, "job finished on the second worker", workers
    )

    assert done.status == TaskResultStatus.SUCCESSFUL, workers.logs()
    assert done.return_value == 2
    assert done.attempts == 2
    assert f":{first.pid}:" in done.worker_ids[0]
    assert f":{second.pid}:" in done.worker_ids[1]
    assert len(done.errors) == 1
    assert done.errors[0].exception_class_path == "later_django.exceptions.WorkerLost"
    assert done.worker_ids[0] in done.errors[0].traceback
    starts = events(lines, "start")
    assert [(line["attempt"], line["pid"]) for line in starts] == [
        (1, first.pid),
        (2, second.pid),
    ]
    assert [line["attempt"] for line in events(lines, "end")] == [2]
    # Taken back once the 1 s lease lapsed: far sooner than the default 30 s lease.
    assert starts[1]["at"] - starts[0]["at"] < 15


def test_a_job_that_ends_its_process_at_once_fails_after_its_retries(
    alias: str, workers: Workers, lines: Path
) -> None:
    """A poison job ends its worker process in its first line, perhaps before its start
    write commits (decision 112): each attempt is counted all the same, from the
    record or from the message's second delivery, so it fails as ``WorkerLost`` after
    its one retry instead of being delivered again and again as attempt 1."""
    job = tasks.exit_process_at_once.enqueue(str(lines), "poison")
    # One worker after another, each ended by the job (at most one per attempt and
    # one more for the failure; a job delivered again as attempt 1 would need more).
    for _ in range(3):
        worker = workers.start(alias, "--lease-seconds", "1")
        wait_for(
            lambda: finished(job) or worker.process.poll() is not None,  # noqa: B023
            START_SECONDS,
            "the job ended the worker, or failed",
            workers,
        )
        if finished(job):
            break
        assert worker.wait_exit(5) == 3, workers.logs()
    done = finished(job)
    assert done is not None, workers.logs()

    assert done.status == TaskResultStatus.FAILED, workers.logs()
    assert done.attempts == 2
    assert [error.exception_class_path for error in done.errors] == [
        "later_django.exceptions.WorkerLost"
    ] * 2
    assert [line["attempt"] for line in events(lines, "run", "poison")] == [1, 2]


def test_sigterm_lets_the_running_job_finish_exits_0_and_leaves_queued_jobs_unclaimed(
    alias: str, workers: Workers, lines: Path
) -> None:
    worker = workers.start(alias, "--concurrency", "1")
    running = tasks.sleep_and_record.enqueue(str(lines), "running", 1.5)
    wait_started(running, lines, "long job started", workers)
    queued = enqueue_many(tasks.record, [((str(lines), number), {}) for number in range(50)])

    worker.send(signal.SIGTERM)
    signalled_at = time.time()
    code = worker.wait_exit(10)
    exited_at = time.time()

    assert code == 0, worker.describe()
    assert status_of(running) == TaskResultStatus.SUCCESSFUL
    (end,) = events(lines, "end", "running")
    assert end["at"] > signalled_at, "the job had ended before the signal: nothing was tested"
    assert exited_at - end["at"] < 5, worker.describe()
    assert events(lines, "run") == []
    for result in queued:
        assert status_of(result) == TaskResultStatus.READY
        assert record_of(alias, result.id).stage == stages.ENQUEUED
    rows = delivery_rows(alias)
    assert len(rows) == 50
    assert rows == [(None, None)] * 50
    assert worker_rows(alias) == []

    # Nothing was lost: another worker runs every one of them.
    burst = workers.start(alias, "--burst")
    assert burst.wait_exit(START_SECONDS) == 0, burst.describe()
    assert all_successful(queued)
    assert sorted(line["label"] for line in events(lines, "run")) == list(range(50))


def test_second_sigterm_during_the_graceful_wait_exits_at_once_with_non_zero(
    alias: str, workers: Workers, lines: Path
) -> None:
    worker = workers.start(alias)
    job = tasks.sleep_and_record.enqueue(str(lines), "long", 20)
    wait_started(job, lines, "long job started", workers)

    worker.send(signal.SIGTERM)
    wait_for(lambda: "finishing running jobs" in worker.log(), 5, "first signal handled", workers)
    time.sleep(0.2)
    assert worker.alive(), worker.describe()
    worker.send(signal.SIGTERM)
    signalled = time.monotonic()
    code = worker.wait_exit(5)

    # 1, not Django's 0 (django-tasks' test_repeat_ctrl_c): the jobs were cut off and
    # handed back, and the process manager is told so (decision 49, docs/worker.md).
    assert code == 1, worker.describe()
    assert time.monotonic() - signalled < 3
    assert "second signal: exiting at once" in worker.log()
    assert events(lines, "end") == []
    # Handed back as lost (issue 12): waiting for its retry, no longer running.
    assert status_of(job) == TaskResultStatus.READY


def test_unknown_task_path_and_undecodable_record_fail_with_a_reason_and_worker_goes_on(
    alias: str, workers: Workers, lines: Path
) -> None:
    plain = tasks.record.enqueue(str(lines), "plain")
    missing = tasks.record.enqueue(str(lines), "missing")
    garbage = tasks.record.enqueue(str(lines), "garbage")
    rewrite_task_path(alias, plain.id, "tests.worker.tasks.plain_function")
    rewrite_task_path(alias, missing.id, "tests.worker.no_such_module.some_task")
    stores_for(alias).kv.set(job_key(NAMESPACE, garbage.id), b"\xc1garbage")

    worker = workers.start(alias)
    bad = [plain.id, missing.id, garbage.id]
    wait_for(
        lambda: all(index_stage(alias, job_id) == stages.FAILED for job_id in bad),
        START_SECONDS,
        "bad jobs failed",
        workers,
    )

    for job_id, cause in [
        (plain.id, "names a function, not a registered django.tasks.Task"),
        (missing.id, "could not import task"),
    ]:
        record = record_of(alias, job_id)
        assert record.stage == stages.FAILED
        assert len(record.errors) == 1
        error = record.errors[0]
        assert error.exception_class_path == "later_django.exceptions.UnregisteredTaskError"
        assert cause in error.traceback
        with pytest.raises(TaskResultDoesNotExist):
            tasks.record.get_result(job_id)
    replaced = record_of(alias, garbage.id)
    assert replaced.stage == stages.FAILED
    assert replaced.reason is not None
    assert "not valid MessagePack" in replaced.reason
    assert replaced.errors[0].exception_class_path == "later_django.exceptions.RecordDecodeError"
    assert stores_for(alias).kv.get(undecodable_key(NAMESPACE, garbage.id)) == b"\xc1garbage"
    assert delivery_rows(alias) == []

    log = worker.log()
    for job_id in bad:
        assert job_id in log, f"nothing logged about job {job_id}\n{worker.describe()}"
    assert worker.alive(), worker.describe()
    after = tasks.record.enqueue(str(lines), "after")
    done = wait_for(lambda: finished(after), 15, "job enqueued afterwards finished", workers)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert [line["label"] for line in read_lines(lines)] == ["after"]

    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0, worker.describe()


def test_queue_option_runs_only_jobs_of_that_queue(
    alias: str, workers: Workers, lines: Path
) -> None:
    on_default = enqueue_many(tasks.record, [((str(lines), f"default-{n}"), {}) for n in range(3)])
    on_emails = enqueue_many(
        tasks.record.using(queue_name="emails"),
        [((str(lines), f"emails-{n}"), {}) for n in range(3)],
    )

    worker = workers.start(alias, "--queue", "emails", "--burst")
    assert worker.wait_exit(START_SECONDS) == 0, worker.describe()

    assert all_successful(on_emails)
    for result in on_default:
        assert status_of(result) == TaskResultStatus.READY
    assert sorted(line["label"] for line in read_lines(lines)) == [f"emails-{n}" for n in range(3)]
    assert delivery_rows(alias, "emails") == []
    assert delivery_rows(alias, "default") == [(None, None)] * 3


def test_burst_runs_ready_jobs_and_exits_0_when_the_queue_is_empty(
    alias: str, workers: Workers, lines: Path
) -> None:
    empty = workers.start(alias, "--burst")
    assert empty.wait_exit(START_SECONDS) == 0, empty.describe()
    assert "stopped after 0 jobs" in empty.log()

    jobs = enqueue_many(tasks.record, [((str(lines), n), {}) for n in range(6)])
    worker = workers.start(alias, "--burst", "--concurrency", "2")
    assert worker.wait_exit(START_SECONDS) == 0, worker.describe()
    assert all_successful(jobs)
    assert sorted(line["label"] for line in read_lines(lines)) == list(range(6))
    assert delivery_rows(alias) == []
    assert worker_rows(alias) == []


def test_max_jobs_exits_0_after_that_many_jobs_with_the_rest_still_queued(
    alias: str, workers: Workers, lines: Path
) -> None:
    jobs = enqueue_many(tasks.record, [((str(lines), n), {}) for n in range(8)])

    worker = workers.start(alias, "--max-jobs", "5")
    assert worker.wait_exit(START_SECONDS) == 0, worker.describe()

    statuses = Counter(status_of(result) for result in jobs)
    assert statuses == {TaskResultStatus.SUCCESSFUL: 5, TaskResultStatus.READY: 3}
    assert len(read_lines(lines)) == 5
    assert delivery_rows(alias) == [(None, None)] * 3
    assert "stopped after 5 jobs" in worker.log()


def test_processes_2_runs_two_worker_processes_that_run_every_job_exactly_once(
    alias: str, workers: Workers, lines: Path
) -> None:
    supervisor = workers.start(alias, "--processes", "2", "--concurrency", "4")
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two worker rows", workers)
    children = {row["pid"] for row in worker_rows(alias)}
    assert len(children) == 2
    assert supervisor.pid not in children
    assert children <= set(session_members(supervisor.pid))

    jobs: list[TaskResult] = []
    for batch in range(4):
        calls = [((str(lines), batch * 50 + n), {}) for n in range(50)]
        jobs += enqueue_many(tasks.record, calls)
    wait_for(lambda: len(read_lines(lines)) >= 200, 60, "200 jobs ran", workers)
    wait_for(lambda: all_successful(jobs), 15, "200 jobs successful", workers)

    supervisor.send(signal.SIGTERM)
    assert supervisor.wait_exit(20) == 0, supervisor.describe()
    ran = read_lines(lines)
    duplicates = [label for label, n in Counter(line["label"] for line in ran).items() if n > 1]
    assert duplicates == []
    assert sorted(line["label"] for line in ran) == list(range(200))
    # Both processes took part (each claims at most 4 at a time out of 200).
    assert {line["pid"] for line in ran} == children
    assert delivery_rows(alias) == []
    assert worker_rows(alias) == []
    assert session_members(supervisor.pid) == []


def test_supervisor_replaces_a_worker_process_that_dies(alias: str, workers: Workers) -> None:
    supervisor = workers.start(alias, "--processes", "2", "--concurrency", "2")
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two worker rows", workers)
    children = {row["pid"] for row in worker_rows(alias)}
    killed = min(children)
    os.kill(killed, signal.SIGKILL)

    replacement = wait_for(
        lambda: {row["pid"] for row in worker_rows(alias)} - children,
        15,
        "a replacement worker process",
        workers,
    )
    assert len(replacement) == 1
    members = set(session_members(supervisor.pid))
    assert killed not in members
    assert replacement | (children - {killed}) <= members
    assert "exited with -9; starting another" in supervisor.log()

    supervisor.send(signal.SIGTERM)
    assert supervisor.wait_exit(20) == 0, supervisor.describe()
    assert session_members(supervisor.pid) == []
    # Only the killed process's row is left (it could not remove it).
    assert [row["pid"] for row in worker_rows(alias)] == [killed]


def test_worker_survives_its_postgresql_connections_being_terminated(
    pg_alias: str, workers: Workers, lines: Path
) -> None:
    worker = workers.start(pg_alias, "--lease-seconds", "3")
    wait_for(lambda: row_of(pg_alias, worker.pid), START_SECONDS, "worker row", workers)

    def listening() -> bool:
        return bool(
            fetch(
                pg_alias,
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND query LIKE 'LISTEN%%'",
            )
        )

    wait_for(listening, 10, "LISTEN connection", workers)
    terminated = fetch(
        pg_alias,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    # False: that backend had ended by itself between the listing and the terminate
    # (a short-lived connection); the worker's own two must be among the True ones.
    assert sum(1 for (ok,) in terminated if ok) >= 2, terminated

    job = tasks.record.enqueue(str(lines), "after the kill")
    done = wait_for(lambda: finished(job), 10, "job after connections were killed", workers)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert [line["pid"] for line in read_lines(lines)] == [worker.pid]
    assert worker.alive(), worker.describe()
    wait_for(listening, 10, "LISTEN connection again", workers)

    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0, worker.describe()


def test_worker_row_carries_a_recent_heartbeat_while_running_and_is_gone_after_exit(
    alias: str, workers: Workers, lines: Path
) -> None:
    worker = workers.start(alias, "--lease-seconds", "1.5", "--concurrency", "3")
    first = wait_for(lambda: row_of(alias, worker.pid), START_SECONDS, "worker row", workers)
    assert first["queues"] == ["default", "emails", "reports"]
    assert first["worker_id"].split(":")[1] == str(worker.pid)

    tasks.sleep_and_record.enqueue(str(lines), "busy", 2)
    busy = wait_for(
        row_where(alias, worker.pid, lambda row: row["busy"] == 1),
        10,
        "a heartbeat reporting one busy thread",
        workers,
    )
    later = wait_for(
        row_where(alias, worker.pid, lambda row: row["heartbeat_at"] > busy["heartbeat_at"]),
        5,
        "a later heartbeat",
        workers,
    )
    assert later["heartbeat_at"] > first["heartbeat_at"]
    assert now_ms() - later["heartbeat_at"] < 1500

    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0, worker.describe()
    assert worker_rows(alias) == []


def test_shutdown_timeout_hands_back_a_job_still_running_and_exits_0(
    alias: str, workers: Workers, lines: Path
) -> None:
    worker = workers.start(alias, "--shutdown-timeout", "1", later=IMMEDIATE_RETRIES)
    job = tasks.sleep_on_first_attempt.enqueue(str(lines), "slow", 30)
    wait_started(job, lines, "slow job started", workers)

    worker.send(signal.SIGTERM)
    signalled = time.monotonic()
    code = worker.wait_exit(15)

    assert code == 0, worker.describe()
    assert time.monotonic() - signalled < 5, worker.describe()
    assert "handing back 1 job(s) still running" in worker.log()
    assert delivery_rows(alias) == [(None, None)]
    # The lease stays, lapsed, so the next worker can name the interrupted attempt's worker.
    leases = fetch(
        alias,
        "SELECT owner, lease_until <= %s FROM later_job_execution "
        "WHERE namespace = %s AND job_id = %s",
        [now_ms(), NAMESPACE, job.id],
    )
    assert len(leases) == 1 and leases[0][1], leases
    first_owner = leases[0][0]
    assert f":{worker.pid}:" in first_owner
    assert events(lines, "end") == []

    # Handed back, it runs again at once on the next worker.
    second = workers.start(alias, "--burst", later=IMMEDIATE_RETRIES)
    assert second.wait_exit(START_SECONDS) == 0, second.describe()
    done = result_of(job)
    assert done.status == TaskResultStatus.SUCCESSFUL, workers.logs()
    assert done.attempts == 2
    assert f":{second.pid}:" in done.worker_ids[1]
    assert done.errors[0].exception_class_path == "later_django.exceptions.WorkerLost"
    assert first_owner in done.errors[0].traceback


def test_burst_with_processes_2_exits_0_once_both_children_drained_and_runs_each_job_once(
    alias: str, workers: Workers, lines: Path
) -> None:
    """``--burst --processes 2``: each child exits 0 after its burst and is not
    replaced; the supervisor then exits 0 (it used to restart them for ever)."""
    jobs = enqueue_many(tasks.record, [((str(lines), n), {}) for n in range(40)])

    supervisor = workers.start(alias, "--burst", "--processes", "2", "--concurrency", "2")
    assert supervisor.wait_exit(START_SECONDS) == 0, supervisor.describe()

    assert all_successful(jobs), workers.logs()
    runs = Counter(line["label"] for line in read_lines(lines))
    assert sorted(runs) == list(range(40))
    assert [label for label, count in runs.items() if count > 1] == []
    assert "starting another" not in supervisor.log(), supervisor.describe()
    assert supervisor.log().count("stopped after") == 2, supervisor.describe()
    assert session_members(supervisor.pid) == []
    assert delivery_rows(alias) == []
    assert worker_rows(alias) == []


def test_burst_with_processes_2_does_not_replace_a_failed_child_and_exits_1(
    alias: str, workers: Workers, lines: Path
) -> None:
    """A child killed during ``--burst`` is not replaced (a burst is one pass; a
    restarted child could fail for ever): the other child drains, and the supervisor
    then exits 1 so the caller learns of the failure."""
    sleeper = tasks.sleep_and_record.enqueue(str(lines), "sleeper", 60)
    quick = enqueue_many(tasks.record, [((str(lines), n), {}) for n in range(20)])

    supervisor = workers.start(alias, "--burst", "--processes", "2", "--concurrency", "1")
    wait_started(sleeper, lines, "the sleeper started", workers)
    (busy,) = {line["pid"] for line in events(lines, "start")}
    os.kill(busy, signal.SIGKILL)
    killed_at = time.monotonic()

    assert supervisor.wait_exit(START_SECONDS) == 1, supervisor.describe()
    assert time.monotonic() - killed_at < 5, supervisor.describe()
    log = supervisor.log()
    assert f"worker process {busy} exited with -9 during --burst; not replaced" in log, log
    assert "starting another" not in log
    assert session_members(supervisor.pid) == []
    assert all_successful(quick), workers.logs()
    runs = Counter(line["label"] for line in events(lines, "run"))
    assert sorted(runs) == list(range(20))
    assert [label for label, count in runs.items() if count > 1] == []
    # The killed child's job waits for its lease, for the next run.
    assert status_of(sleeper) == TaskResultStatus.RUNNING
