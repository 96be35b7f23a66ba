"""End-to-end job benchmark: enqueue, enqueue in one transaction, bulk enqueue,
drain, CPU per job, latency and worker RSS, optionally against django-tasks-db and
Procrastinate on the same kind of database.

Every scenario of every run gets its own throw-away database, migrated with
Django's ``migrate``: a SQLite file in a temporary directory (WAL,
``transaction_mode="IMMEDIATE"``, ``synchronous=NORMAL``, 20 s timeout), a
PostgreSQL database or a MariaDB/MySQL one (``--db mariadb``: ``utf8mb4``, READ
COMMITTED) created and dropped for it. The Django project is
``bench/bench_project`` (settings read ``BENCH_SYSTEM`` and ``BENCH_DATABASE_URL``;
tasks ``noop`` and ``stamp``: ``tasks.py`` for later_django and django-tasks-db,
``procrastinate_tasks.py`` for Procrastinate). Each scenario runs in a driver
subprocess; workers are real ``python -m django`` commands started by the driver
with the same settings.

Scenarios (``--scenarios``, default all):

* ``enqueue``: ``--enqueue-jobs`` (3,000) ``noop.enqueue()`` (Procrastinate:
  ``noop.defer()``), each in its own ``transaction.atomic()`` -> jobs/s, plus
  ``ms_per_job``. Beside it, in the same driver and database, ``--bare-inserts``
  (2,000) bare ``INSERT`` of one 100-byte row + ``COMMIT`` through the same driver
  without Django (psycopg / sqlite3 with the bench's pragmas and ``BEGIN
  IMMEDIATE``), interleaved with the enqueues in 10 rounds so that other load hits
  both alike -> ``bare_insert_commit_ms`` (its own line, from later_django's run)
  and, on every enqueue line, ``over_bare_ms`` = ``ms_per_job`` - the bare ms (the
  target for later_django: <= 0.35).
* ``enqueue_in_tx``: ``--in-tx-jobs`` (2,000) ``noop.enqueue()`` (``defer()``)
  inside ONE ``transaction.atomic()``, its commit included -> jobs/s and
  ``ms_per_call``, what a view pays per job it enqueues.
* ``enqueue_many``: ``--bulk-jobs`` (20,000) jobs in batches of 1,000, one
  transaction per batch: ``enqueue_many`` for later_django, ``batch_defer`` for
  Procrastinate, a loop of ``enqueue()`` for django-tasks-db (it has no bulk API)
  -> jobs/s.
* ``enqueue_unique`` (later_django only): ``--enqueue-jobs`` enqueues of each kind,
  each in its own ``transaction.atomic()``, interleaved in 10 rounds with no worker
  running: ``noop.enqueue()`` (plain), ``api.enqueue_unique(noop, <a new key>)`` (a
  job written and its key taken) and ``api.enqueue_unique(noop, <a held key>)`` (a
  duplicate: nothing written) -> jobs/s of the unique enqueues with new keys, and
  ``ms_per_job`` of each kind: what a unique key costs over a plain enqueue.
* The three enqueue scenarios run with the system's two workers started and
  idle beforehand (``--enqueue-workers on``, the default: as in production, each
  enqueue may wake a worker, which then competes for the cores) or with none
  (``off``); every enqueue line says which (``enqueue_workers``).
* ``drain``: the workers are started on an empty queue and waited for (a
  ``later_worker`` row each / the "Starting worker" log line / a
  ``procrastinate_workers`` row each), then ``--drain-jobs`` no-op jobs are
  published in one committed transaction (not timed; Procrastinate:
  ``batch_defer`` of 1,000 per call); the time runs from that commit until every
  job has finished (read every 0.1 s) -> jobs/s. Worker start-up is not in the
  time. ``--drain-jobs`` is the same for every system: 5,000 by default with
  ``--compare`` (the peers drain ~100-400 jobs/s here and django-tasks-db slows
  as its queue grows, so a like-for-like ratio at 20,000 would take minutes per
  run), 20,000 without. A drain stops at ``--drain-timeout`` (300 s); the line
  then says ``timed_out`` and the rate is over the jobs finished by then.
* ``cpu_per_job`` and ``machine_cpu_per_job`` (reported by the drain): the
  worker commands' CPU (utime + stime of their processes and all descendants,
  later_django's forked children included, from ``/proc/PID/stat``) and the whole
  machine's busy CPU (``/proc/stat``, all cores, everything but idle and iowait:
  the database server, the driver's publishing and any other load included),
  read just before publishing and right after the last job was seen finished,
  divided by the jobs finished -> ms per job, lower is better.
* ``latency``: the idle workers, then ``--latency-jobs`` (500) ``stamp`` jobs at
  ``--latency-rate`` (50) per second, each in its own transaction; latency = the
  task's start time (``time.time()`` when the task function starts) - the enqueue
  time (so it includes the enqueue's commit) -> p50/p95/p99 in ms. later_django and
  django-tasks-db return the start time as the result; Procrastinate stores no
  return value, so its ``stamp`` writes (job id, start time) to a small table
  after taking the time, and the driver reads that table at the end.
* ``rss``: the highest peak RSS (``VmHWM``) of the worker processes at the end
  of the drain (later_django: the two processes ``--processes 2`` forks, the
  supervisor reported beside them; the peers: their two worker processes) -> MB.
  Runs the drain when ``drain`` is not selected.
* ``log_append`` (later_django only): ``--log-records`` (100,000) retained-log
  records (100-byte payloads, 1,000 keys, topic of 8 partitions) appended with
  ``log(topic).append_many`` in batches of 1,000, one transaction each -> records/s.
* ``log_consume`` (later_django only): the same records appended first (not timed),
  then one consumer-group member polls 1,000 at a time and commits each poll with
  ``commit_records`` until it has read them all -> records/s.
* ``partition_drain`` (later_django only): like ``drain``, but the ``--drain-jobs``
  no-op jobs go to a topic of 16 partitions over 1,000 keys (one committed batch,
  not timed); each partition runs one job at a time, in order, on the worker
  process that leases it -> jobs/s.
* ``drain_limited`` (later_django only): ``drain`` with
  ``LATER["QUEUE_LIMITS"] = {"default": {"concurrency": 8}}`` for the workers (at
  most 8 of the 32 threads run a job at once) -> jobs/s; what a concurrency limit
  costs the claim (slots taken and given back around every claim and finish).
* ``fan_in`` (later_django only; ``bench/fan_in.py``): on the idle workers, a plain
  drain of ``--drain-jobs`` no-op jobs, then twice as many no-op parents with one
  child waiting for all of them (``api.after``), then the plain drain again (ABBA),
  each batch one committed transaction ->
  ``ready_ms`` (the value: the child's ``ready_at`` - the last parent's
  ``finished_at``, from the records), ``started_ms`` (to the child's start), and
  ``of_drain`` (the parents' drain rate / the plain drain's, same run).
* ``batch`` (later_django only; ``bench/fan_in.py``): the same with a batch of
  ``--drain-jobs`` members and an ``on_success`` callback (``later_django.batches``) ->
  ``callback_ms`` (the value: the callback job's ``ready_at`` - the last member's
  ``finished_at``) and ``of_drain``.
* ``chain_results`` (later_django only; ``bench/chain_results.py``): on the idle
  workers, a chain of ``--chain-steps`` (1,000) ``continue_with`` jobs enqueued in one
  transaction, each returning its parent's result + 1 (``context.parent_results``),
  and the same chain whose steps do not read it (ABBA) -> steps/s (the value: steps /
  the last step's ``finished_at`` - the enqueue's commit), ``of_blind``.
* Backlog scenarios (later_django only, opt-in: name them in ``--scenarios``;
  ``bench/backlog.py``): each builds its backlog once per invocation
  (``--backlog`` jobs per part, default 1,000,000; ``api.enqueue_many`` in
  transactions of ``--backlog-batch``, 10,000) into a template that every run copies,
  and runs ``--runs`` rounds of (the plain scenario on an empty database, then the
  scenario on a copy); each line has the rate and ``of_plain`` (backlog / plain,
  the medians; ``of_plain_runs`` per round).

  * ``drain_backlog``: ``--backlog`` ready no-op jobs in ``default``; the workers
    start on them; timed from both workers up until ``--drain-jobs`` (20,000) more
    have finished -> jobs/s over the head of the backlog (plain: ``drain``).
  * ``drain_other_queue``: ``drain`` beside ``--backlog`` ready jobs in a queue no
    worker serves, ``--backlog`` ready in a served queue paused with
    ``api.pause_queue``, and ``--backlog`` finished jobs kept (records and index rows
    as a finish leaves them); workers ``--queue default --queue bench_paused``, the
    plain drain's too.
  * ``drain_delayed``: ``drain`` beside ``--backlog`` delayed jobs in ``default``
    (``run_after`` an hour after the build).
  * ``enqueue_backlog``: ``enqueue`` with ``--backlog`` ready jobs in ``default``,
    no workers for it and its plain run (idle ones would drain the backlog).

Workers: later_django ``later_worker --processes 2 --concurrency 16``;
django-tasks-db two ``db_worker --interval 0.1 --no-startup-delay --no-reload``
processes (one task at a time each; ``--interval`` is how long an idle worker
sleeps between looks: its default of 1 s would add ~0.5 s to every latency);
Procrastinate two ``procrastinate worker`` processes with its defaults
(concurrency 1: one job at a time each; woken by LISTEN/NOTIFY, polling every 5 s
besides). Their logs (start and stop lines; none logs each task here) go to the
run's temporary directory (``--log-dir DIR`` keeps them); lines with
WARNING/ERROR/Traceback are counted in ``worker_problems`` and echoed to stderr.

One JSON line per figure on stdout, keys ``scenario``, ``db``, ``system``,
``value`` (median of ``--runs``), ``unit``, ``runs``. ``--compare`` installs
django-tasks-db and Procrastinate into the venv when they are missing and runs
the systems interleaved in every run (later_django, django-tasks-db,
Procrastinate); each peer line has ``version`` and ``ratio``: how many times
better later_django is, so > 1 favours later_django whatever the unit (rates:
later_django / peer; latency, CPU and RSS, lower is better: peer / later_django).
Procrastinate has no SQLite connector: with ``--db sqlite`` each of its figures is
one line with ``"value": null`` and ``skipped`` saying why. ``--table`` prints a
Markdown table of all figures (a column per system, one per peer's ratio) to
stderr at the end.

    .venv/bin/python bench/bench.py --db sqlite
    .venv/bin/python bench/bench.py --db postgres --compare --runs 3 --table
    .venv/bin/python bench/bench.py --db postgres --scenarios drain,rss --concurrency 32

MariaDB/MySQL: ``--mariadb-url`` (default ``mysql://root@127.0.0.1:3306/bench_later``),
dropped and created (``CHARACTER SET utf8mb4``) for every scenario run and dropped at
the end; the bare INSERT+COMMIT through MySQLdb; Procrastinate's figures are "skipped"
lines (it has no MySQL connector); ``bloat`` and the backlog scenarios refuse it.
``--worker-poll-interval S`` sets later_django's ``LATER["WORKER_POLL_INTERVAL"]`` for
its workers (an idle worker on MySQL polls; default 0.05 s).

PostgreSQL: ``--postgres-url`` (default ``postgres://root@127.0.0.1:5432/bench_later``);
that database is dropped and created for every scenario run and dropped at the end
(the backlog templates: ``<name>_backlog_<kind>``, dropped at the end too).

Finished jobs are counted from the stage counters (``later_stage_counts``, success
and failed summed over the shards), never a ``COUNT(*)`` over the index; a drain
subtracts what had finished before it published.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The repository root first: this file's own directory would make ``bench`` this script.
sys.path.insert(0, str(ROOT))

from bench import backlog, chain_results, fan_in  # noqa: E402  (after the path is set)

SETTINGS_MODULE = "bench.bench_project.settings"
NAMESPACE = "bench"  # LATER["NAMESPACE"] in bench_project.settings
LATER = "later_django"
DTDB = "django-tasks-db"
PROC = "procrastinate"
#: The peers of ``--compare``, in the order they run (after later_django) and print.
PEERS = (DTDB, PROC)
#: Peers that run on PostgreSQL only: on SQLite and MariaDB each of their figures is a
#: "skipped" line ("{database}" is filled in).
POSTGRES_ONLY = {PROC: "Procrastinate has no {database} connector: it runs on PostgreSQL only"}
#: The database each ``--db`` names, as the figures and messages say it.
DATABASE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "mariadb": "MySQL/MariaDB"}
SCENARIOS = [
    "enqueue",
    "enqueue_in_tx",
    "enqueue_many",
    "drain",
    "latency",
    "rss",
    "log_append",
    "log_consume",
    "partition_drain",
    "enqueue_unique",
    "drain_limited",
    "fan_in",
    "batch",
    "chain_results",
]
#: Opt-in scenarios (not in the default list): ``bloat`` takes a throwaway PostgreSQL
#: cluster and ``--bloat-minutes`` (10) of steady load (``bench/bloat.py``).
OPT_IN_SCENARIOS = ["bloat", *backlog.SCENARIOS]
#: Scenarios that ``--db mariadb`` refuses, and why.
POSTGRES_OR_SQLITE_ONLY = {
    "bloat": "it measures PostgreSQL's dead tuples in a throwaway PostgreSQL cluster "
    "(on MariaDB: bench/innodb_history.py)",
    **{
        name: "its backlog template is a PostgreSQL template database or a SQLite file copy"
        for name in backlog.SCENARIOS
    },
}
#: Scenarios of later_django features the peers lack: never run for them (no ratio).
LATER_ONLY = {
    "log_append",
    "log_consume",
    "partition_drain",
    "enqueue_unique",
    "drain_limited",
    "fan_in",
    "batch",
    "chain_results",
}
#: drain_limited: the concurrency limit of the drained queue (``BENCH_QUEUE_LIMITS``).
LIMITED_CONCURRENCY = 8
#: Scenarios that run with the system's two workers started and idle (``--enqueue-workers on``).
ENQUEUE_SCENARIOS = {"enqueue", "enqueue_in_tx", "enqueue_many"}
#: The figures one drain run reports, in print order (``rss`` only when selected).
DRAIN_FIGURES = ("drain", "cpu_per_job", "machine_cpu_per_job", "rss")
#: ``--drain-jobs`` when not given: the same count for every system.
DRAIN_JOBS_COMPARE, DRAIN_JOBS_ALONE = 5_000, 20_000
BARE_TABLE, BARE_PAYLOAD_BYTES, BARE_ROUNDS = "bench_bare_insert", 100, 10
#: The driver of the bare INSERT+COMMIT beside ``enqueue``, per ``--db``.
BARE_DRIVERS = {"sqlite": "sqlite3", "postgres": "psycopg", "mariadb": "MySQLdb"}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: Figures in ms that are fractions of a millisecond: three decimals.
EXACT_MS = {"bare_insert_commit", "cpu_per_job", "machine_cpu_per_job"}
#: partition_drain: topic, partitions, distinct keys (``BENCH_TOPICS`` reaches the workers).
PARTITION_TOPIC, PARTITION_COUNT, PARTITION_KEYS = "bench_ordered", 16, 1_000
#: Retained-log scenarios: topic, its partitions, records per append_many / poll, payload size.
LOG_TOPIC, LOG_PARTITIONS, LOG_BATCH, LOG_PAYLOAD_BYTES = "bench_log", 8, 1_000, 100
BULK_BATCH = 1_000
POLL_SECONDS = 0.1
WORKER_START_TIMEOUT = 60.0
PROBLEM_MARKERS = ("WARNING", "ERROR", "CRITICAL", "Traceback", "Exception")


# --- the driver: one scenario of one system on one database, in its own process ---


@dataclass
class Workers:
    """The worker processes of one system, their log files and their pids."""

    processes: list[subprocess.Popen]
    logs: list[Path]

    def job_pids(self) -> list[int]:
        """The processes that run jobs: later_django's forked children (the
        supervisor only waits), the peers' worker processes."""
        pids = []
        for process in self.processes:
            children = _children(process.pid)
            pids.extend(children or [process.pid])
        return pids

    def cpu_seconds(self) -> float:
        """User + system CPU of the worker commands' processes and all their
        descendants (later_django's forked workers), those that exited included
        (their time is in their parent's cutime/cstime once reaped)."""
        ticks = 0
        for process in self.processes:
            for pid in _tree(process.pid):
                with contextlib.suppress(OSError, IndexError, ValueError):
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    # after the comm: state is field 3, utime 14, stime 15, cutime 16, cstime 17
                    ticks += sum(int(value) for value in fields[11:15])
        return ticks / CLOCK_TICKS


def machine_busy_seconds() -> float:
    """Busy CPU of the whole machine, all cores, from /proc/stat's ``cpu`` line:
    user + nice + system + irq + softirq + steal (idle and iowait left out; guest
    time is already in user)."""
    values = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return sum(values[index] for index in (0, 1, 2, 5, 6, 7)) / CLOCK_TICKS


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    pids = [pid]
    for child in _children(pid):
        pids.extend(_tree(child))
    return pids


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            # pid (comm) state ppid ...; comm may hold spaces, so split after ")".
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


def _peak_rss_mb(pid: int) -> float | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def start_workers(system: str, options: argparse.Namespace, log_dir: Path) -> Workers:
    django_command = [sys.executable, "-m", "django"]
    if system == LATER:
        commands = [
            [
                *django_command,
                "later_worker",
                "--processes",
                "2",
                "--concurrency",
                str(options.concurrency),
                "--shutdown-timeout",
                "10",
                # BENCH_WORKER_QUEUES (JSON list): --queue for each (backlog scenarios)
                *(
                    argument
                    for name in json.loads(os.environ.get("BENCH_WORKER_QUEUES", "[]"))
                    for argument in ("--queue", name)
                ),
                *(
                    ["--metrics-port", str(options.metrics_port)]
                    if options.metrics_port is not None
                    else []
                ),
            ]
        ]
    elif system == PROC:
        # Its worker with its defaults: one job at a time (concurrency 1), woken by
        # LISTEN/NOTIFY, polling every 5 s besides.
        commands = [[*django_command, "procrastinate", "worker"] for _ in range(2)]
    else:
        commands = [
            [
                *django_command,
                "db_worker",
                "--interval",
                str(options.dtdb_interval),
                "--no-startup-delay",
                "--no-reload",
                "--worker-id",
                f"bench-{n}",
            ]
            for n in range(2)
        ]
    processes, logs = [], []
    for n, command in enumerate(commands):
        log = log_dir / f"{options.label}-worker{n}.log"
        with log.open("wb") as output:
            processes.append(
                subprocess.Popen(
                    command,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=ROOT,
                    start_new_session=True,
                )
            )
        logs.append(log)
    return Workers(processes, logs)


def wait_until_ready(system: str, workers: Workers) -> float:
    """Waits until both worker processes are looking for work; returns the seconds taken."""
    started = time.perf_counter()
    while time.perf_counter() - started < WORKER_START_TIMEOUT:
        for process, log in zip(workers.processes, workers.logs, strict=True):
            if process.poll() is not None:
                raise SystemExit(
                    f"{system} worker exited with {process.returncode}:\n{log.read_text()[-3000:]}"
                )
        if system == LATER:
            from later_django.core.clock import now_ms
            from later_django.storage.stores import stores_for

            live = stores_for("default").executions.workers_live(NAMESPACE, now_ms() - 60_000)
            ready = len(live) >= 2
        elif system == PROC:
            ready = _sql_value("SELECT count(*) FROM procrastinate_workers") >= 2
        else:
            ready = all("Starting worker" in log.read_text() for log in workers.logs)
        if ready:
            return time.perf_counter() - started
        time.sleep(POLL_SECONDS)
    raise SystemExit(f"{system} workers not ready after {WORKER_START_TIMEOUT:.0f} s")


def stop_workers(workers: Workers) -> list[str]:
    """SIGTERM (graceful), SIGKILL after 20 s; returns the log lines that look like trouble."""
    job_pids = workers.job_pids()
    for process in workers.processes:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 20
    for process in workers.processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for pid in [process.pid, *job_pids]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.wait()
    problems = []
    for log in workers.logs:
        for line in log.read_text(errors="replace").splitlines():
            if any(marker in line for marker in PROBLEM_MARKERS):
                problems.append(line.strip())
    return problems


def _sql_value(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def _sql_rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


FINISHED_COUNTERS_SQL = (
    "SELECT stage, SUM(count) FROM later_stage_counts"
    " WHERE namespace = %s AND stage IN ('success', 'failed') GROUP BY stage"
)


def finished_count(system: str) -> tuple[int, int]:
    """(successful, failed) jobs, read cheaply."""
    if system == LATER:
        # The stage counters (kept exact by triggers on the index, finished stages
        # counted since migration 0005): a few rows per stage, however many jobs are
        # kept. They count every index row that exists, expired ones the sweep has
        # not deleted yet too; the bench keeps finished jobs a day, so none expire.
        by_stage = dict(_sql_rows(FINISHED_COUNTERS_SQL, [NAMESPACE]))
        return int(by_stage.get("success", 0)), int(by_stage.get("failed", 0))
    if system == PROC:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT status, count(*) FROM procrastinate_jobs"
                " WHERE status IN ('succeeded', 'failed') GROUP BY status"
            )
            by_status = dict(cursor.fetchall())
        return by_status.get("succeeded", 0), by_status.get("failed", 0)
    from django.db.models import Count
    from django_tasks_db.models import DBTaskResult

    rows = (
        DBTaskResult.objects.filter(status__in=["SUCCESSFUL", "FAILED"])
        .values("status")
        .annotate(n=Count("id"))
    )
    by_status = {row["status"]: row["n"] for row in rows}
    return by_status.get("SUCCESSFUL", 0), by_status.get("FAILED", 0)


def tasks_of(system: str) -> Any:
    """The module of the system's ``noop`` and ``stamp`` tasks."""
    if system == PROC:
        from bench.bench_project import procrastinate_tasks

        return procrastinate_tasks
    from bench.bench_project import tasks

    return tasks


def enqueue_one(system: str, task: Any, *args: Any) -> Any:
    """One job, in the caller's transaction: ``enqueue()`` (Procrastinate: ``defer()``,
    which takes keyword arguments only; the tasks here take at most ``enqueued_at``)."""
    if system == PROC:
        return task.defer(**({"enqueued_at": args[0]} if args else {}))
    return task.enqueue(*args)


def enqueue_batch(system: str, task: Any, calls: list[tuple[tuple, dict]]) -> list[Any]:
    """One transaction: ``enqueue_many`` for later_django, ``batch_defer`` for
    Procrastinate, a loop of ``enqueue`` for django-tasks-db (it has no bulk API)."""
    from django.db import transaction

    if system == LATER:
        from later_django.api import enqueue_many

        with transaction.atomic():
            return enqueue_many(task, calls)
    if system == PROC:
        with transaction.atomic():
            return task.batch_defer(*[kwargs for _, kwargs in calls])
    with transaction.atomic():
        return [task.enqueue(*args, **kwargs) for args, kwargs in calls]


def wait_finished(
    system: str, expected: int, timeout: float, before: tuple[int, int] = (0, 0)
) -> tuple[float, int, int]:
    """Polls until ``expected`` jobs finished or ``timeout``; returns (seconds, success,
    failed), counted from ``before`` (the jobs already finished when the time started)."""
    started = time.perf_counter()
    while True:
        success, failed = finished_count(system)
        success, failed = success - before[0], failed - before[1]
        elapsed = time.perf_counter() - started
        if success + failed >= expected or elapsed >= timeout:
            return elapsed, success, failed
        time.sleep(POLL_SECONDS)


@contextlib.contextmanager
def enqueue_workers(system: str, options: argparse.Namespace, log_dir: Path):  # type: ignore[no-untyped-def]
    """``--enqueue-workers on``: the system's two workers started and waited for (idle)
    around an enqueue scenario, as in production, where each enqueue may wake a
    worker that then competes for the cores; ``off``: none. Yields the figures'
    ``workers`` and ``worker_problems`` (filled in when the workers have stopped)."""
    state: dict[str, Any] = {"enqueue_workers": options.enqueue_workers, "worker_problems": []}
    if options.enqueue_workers == "off":
        yield state
        return
    workers = start_workers(system, options, log_dir)
    try:
        wait_until_ready(system, workers)
        yield state
    finally:
        state["worker_problems"] = stop_workers(workers)


@contextlib.contextmanager
def bare_inserts():  # type: ignore[no-untyped-def]
    """The floor under one enqueue: yields ``insert(count) -> seconds``, which runs
    ``count`` times one bare ``INSERT`` of a small row (``BARE_PAYLOAD_BYTES`` of
    bytea/blob) and its ``COMMIT`` on the run's database through the same driver,
    outside Django: psycopg with Django's connection parameters (not autocommit, so
    psycopg sends ``BEGIN`` as it does inside Django's ``atomic()``), or sqlite3 with
    the bench's pragmas (WAL, ``synchronous=NORMAL``, ``BEGIN IMMEDIATE``). Its own
    connection and a throw-away table, dropped afterwards."""
    from django.db import connection

    payload = b"x" * BARE_PAYLOAD_BYTES
    if connection.vendor == "sqlite":
        import sqlite3

        lite = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, timeout=20)
        lite.execute("PRAGMA journal_mode=WAL")
        lite.execute("PRAGMA synchronous=NORMAL")
        lite.execute(f"CREATE TABLE {BARE_TABLE} (id INTEGER PRIMARY KEY, payload BLOB)")

        def insert_lite(count: int) -> float:
            started = time.perf_counter()
            for _ in range(count):
                lite.execute("BEGIN IMMEDIATE")
                lite.execute(f"INSERT INTO {BARE_TABLE} (payload) VALUES (?)", (payload,))
                lite.execute("COMMIT")
            return time.perf_counter() - started

        try:
            yield insert_lite
            lite.execute(f"DROP TABLE {BARE_TABLE}")
        finally:
            lite.close()
        return
    if connection.vendor == "mysql":
        import MySQLdb

        # Django's parameters (READ COMMITTED, utf8mb4); autocommit off, as in atomic().
        my = MySQLdb.connect(**connection.get_connection_params())
        try:
            cursor = my.cursor()
            cursor.execute(
                f"CREATE TABLE {BARE_TABLE} (id bigint AUTO_INCREMENT PRIMARY KEY, payload blob)"
            )

            def insert_my(count: int) -> float:
                started = time.perf_counter()
                for _ in range(count):
                    cursor.execute(f"INSERT INTO {BARE_TABLE} (payload) VALUES (%s)", (payload,))
                    my.commit()
                return time.perf_counter() - started

            yield insert_my
            cursor.execute(f"DROP TABLE {BARE_TABLE}")
        finally:
            my.close()
        return
    import psycopg

    with psycopg.connect(**connection.get_connection_params()) as pg:
        pg.execute(f"CREATE TABLE {BARE_TABLE} (id bigserial PRIMARY KEY, payload bytea)")
        pg.commit()

        def insert_pg(count: int) -> float:
            started = time.perf_counter()
            for _ in range(count):
                pg.execute(f"INSERT INTO {BARE_TABLE} (payload) VALUES (%s)", (payload,))
                pg.commit()
            return time.perf_counter() - started

        yield insert_pg
        pg.execute(f"DROP TABLE {BARE_TABLE}")
        pg.commit()


def run_enqueue(system: str, options: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """``--enqueue-jobs`` enqueues, each in its own ``transaction.atomic()``, and
    ``--bare-inserts`` bare INSERT+COMMITs (``bare_inserts``), interleaved in
    ``BARE_ROUNDS`` rounds (a slice of bare commits, then a slice of enqueues) so that
    other load and the workers' activity hit both alike; each total is timed alone."""
    from django.db import transaction

    noop = tasks_of(system).noop
    jobs = options.enqueue_jobs
    seconds = bare_s = 0.0
    with enqueue_workers(system, options, log_dir) as state, bare_inserts() as insert:
        for round_ in range(BARE_ROUNDS):
            bare_s += insert(_slice(options.bare_inserts, round_))
            started = time.perf_counter()
            for _ in range(_slice(jobs, round_)):
                with transaction.atomic():
                    enqueue_one(system, noop)
            seconds += time.perf_counter() - started
    ms_per_job = seconds * 1000 / jobs
    bare_ms = bare_s * 1000 / options.bare_inserts
    return {
        "value": jobs / seconds,
        "jobs": jobs,
        "seconds": round(seconds, 3),
        "ms_per_job": ms_per_job,
        "bare_insert_commit_ms": bare_ms,
        "over_bare_ms": ms_per_job - bare_ms,
        **state,
    }


def run_enqueue_unique(options: argparse.Namespace) -> dict[str, Any]:
    """Plain, unique-new and unique-duplicate enqueues, ``--enqueue-jobs`` of each, each
    in its own transaction, interleaved in ``BARE_ROUNDS`` rounds; no worker runs."""
    from django.db import transaction

    from later_django.api import enqueue_unique

    noop = tasks_of(LATER).noop
    jobs = options.enqueue_jobs
    seconds = {"plain": 0.0, "unique": 0.0, "duplicate": 0.0}
    with transaction.atomic():
        enqueue_unique(noop, "held")
    written = 0
    for round_ in range(BARE_ROUNDS):
        count = _slice(jobs, round_)
        for kind in seconds:
            started = time.perf_counter()
            for _ in range(count):
                with transaction.atomic():
                    if kind == "plain":
                        noop.enqueue()
                    elif kind == "unique":
                        enqueue_unique(noop, f"key-{written}")
                        written += 1
                    else:
                        enqueue_unique(noop, "held")
            seconds[kind] += time.perf_counter() - started
    return {
        "value": jobs / seconds["unique"],
        "jobs": jobs,
        "ms_per_job": {kind: round(spent * 1000 / jobs, 3) for kind, spent in seconds.items()},
    }


def _slice(total: int, round_: int) -> int:
    """Round ``round_``'s share of ``total`` over ``BARE_ROUNDS`` rounds (they add up)."""
    return total * (round_ + 1) // BARE_ROUNDS - total * round_ // BARE_ROUNDS


def run_enqueue_in_tx(system: str, options: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """``--in-tx-jobs`` (2,000) enqueues inside ONE ``transaction.atomic()``: what a
    view pays per job it enqueues -> jobs/s and ms per call (the commit included)."""
    from django.db import transaction

    noop = tasks_of(system).noop
    jobs = options.in_tx_jobs
    with enqueue_workers(system, options, log_dir) as state:
        started = time.perf_counter()
        with transaction.atomic():
            for _ in range(jobs):
                enqueue_one(system, noop)
        seconds = time.perf_counter() - started
    return {
        "value": jobs / seconds,
        "jobs": jobs,
        "seconds": round(seconds, 3),
        "ms_per_call": seconds * 1000 / jobs,
        **state,
    }


def run_enqueue_many(system: str, options: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    noop = tasks_of(system).noop
    jobs = options.bulk_jobs
    with enqueue_workers(system, options, log_dir) as state:
        started = time.perf_counter()
        for start in range(0, jobs, BULK_BATCH):
            enqueue_batch(system, noop, [((), {})] * min(BULK_BATCH, jobs - start))
        seconds = time.perf_counter() - started
    return {"value": jobs / seconds, "jobs": jobs, "seconds": round(seconds, 3), **state}


def run_drain(system: str, options: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    noop = tasks_of(system).noop
    jobs = options.drain_jobs
    workers = start_workers(system, options, log_dir)
    try:
        ready_s = wait_until_ready(system, workers)
        before = finished_count(system)  # jobs kept from before (backlog scenarios)
        cpu_before, machine_before = workers.cpu_seconds(), machine_busy_seconds()
        started = time.perf_counter()
        if system == PROC:
            # batch_defer in batches of 1,000 (its bulk path), all in one transaction.
            from django.db import transaction

            with transaction.atomic():
                for first in range(0, jobs, BULK_BATCH):
                    noop.batch_defer(*[{}] * min(BULK_BATCH, jobs - first))
        else:
            enqueue_batch(system, noop, [((), {})] * jobs)
        publish_s = time.perf_counter() - started
        seconds, success, failed = wait_finished(system, jobs, options.drain_timeout, before)
        cpu_s = workers.cpu_seconds() - cpu_before
        machine_s = machine_busy_seconds() - machine_before
        job_pids = workers.job_pids()
        rss = {pid: _peak_rss_mb(pid) for pid in job_pids}
        supervisor_rss = _peak_rss_mb(workers.processes[0].pid) if system == LATER else None
        if supervisor_rss is not None:
            rss[workers.processes[0].pid] = supervisor_rss
    finally:
        problems = stop_workers(workers)
    done = max(success + failed, 1)
    return {
        **_drain_figures(jobs, success, failed, seconds, publish_s, ready_s),
        "worker_cpu_seconds": round(cpu_s, 3),
        "machine_cpu_seconds": round(machine_s, 3),
        "cpu_ms_per_job": cpu_s * 1000 / done,
        "machine_cpu_ms_per_job": machine_s * 1000 / done,
        "rss_mb": max((value for value in rss.values() if value is not None), default=None),
        "rss_job_processes_mb": sorted(
            value for pid, value in rss.items() if value is not None and pid in job_pids
        ),
        "supervisor_rss_mb": supervisor_rss,
        "worker_problems": problems,
    }


def run_partition_drain(options: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """``drain`` over topic partitions: 20,000 no-op jobs, 1,000 keys, 16 partitions,
    ``later_worker --processes 2``; timed from the commit to the last finished."""
    import dataclasses

    from django.db import transaction

    from bench.bench_project.tasks import noop

    jobs = options.drain_jobs
    workers = start_workers(LATER, options, log_dir)
    try:
        ready_s = wait_until_ready(LATER, workers)
        backend = noop.get_backend()
        job = backend.new_job(noop, (), {})
        batch = [
            dataclasses.replace(
                job, topic=PARTITION_TOPIC, partition_key=f"key-{n % PARTITION_KEYS}"
            )
            for n in range(jobs)
        ]
        started = time.perf_counter()
        with transaction.atomic():
            backend.write_jobs([noop] * jobs, batch)
        publish_s = time.perf_counter() - started
        seconds, success, failed = wait_finished(LATER, jobs, options.drain_timeout)
    finally:
        problems = stop_workers(workers)
    return {
        **_drain_figures(jobs, success, failed, seconds, publish_s, ready_s),
        "worker_problems": problems,
    }


def _drain_figures(
    jobs: int, success: int, failed: int, seconds: float, publish_s: float, ready_s: float
) -> dict[str, Any]:
    """The figures every drain-like scenario reports."""
    done = success + failed
    return {
        "value": done / seconds,
        "jobs": jobs,
        "completed": done,
        "failed": failed,
        "timed_out": done < jobs,
        "seconds": round(seconds, 3),
        "publish_seconds": round(publish_s, 3),
        "worker_start_seconds": round(ready_s, 3),
    }


def run_latency(system: str, options: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """``stamp`` jobs at a steady rate; latency = the task's start time - the enqueue
    time. later_django and django-tasks-db return the start time (their result);
    Procrastinate stores no return value, so its ``stamp`` writes (job id, start
    time) to a small table (``procrastinate_tasks.STAMP_TABLE``), read at the end:
    the time is taken when the task function starts, as for the others, rather than
    its ``procrastinate_events`` 'started' row, which is the database's ``now()``
    of the fetching transaction (earlier than the function's start)."""
    from django.db import connection, transaction

    stamp = tasks_of(system).stamp
    jobs, rate = options.latency_jobs, options.latency_rate
    if system == PROC:
        from bench.bench_project.procrastinate_tasks import STAMP_TABLE

        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE TABLE {STAMP_TABLE}"
                " (job_id bigint PRIMARY KEY, started_at double precision NOT NULL)"
            )
    workers = start_workers(system, options, log_dir)
    try:
        wait_until_ready(system, workers)
        sent: list[tuple[Any, float]] = []
        committed_ms: list[float] = []  # enqueue time -> its commit returned
        started = time.perf_counter()
        for n in range(jobs):
            pause = started + n / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            enqueued_at = time.time()
            with transaction.atomic():
                result = enqueue_one(system, stamp, enqueued_at)
            committed_ms.append((time.time() - enqueued_at) * 1000)
            sent.append((result if system == PROC else result.id, enqueued_at))
        send_s = time.perf_counter() - started
        _, _, failed = wait_finished(system, jobs, timeout=60)
    finally:
        problems = stop_workers(workers)
    latencies_ms = []
    to_started_ms = []  # enqueue time -> the result's started_at (the system's own clock)
    if system == PROC:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT job_id, started_at FROM {STAMP_TABLE}")
            started_at = dict(cursor.fetchall())
        for job_id, enqueued_at in sent:
            if job_id in started_at:
                latencies_ms.append((started_at[job_id] - enqueued_at) * 1000)
    else:
        from later_django.compat.tasks import TaskResultStatus

        for result_id, enqueued_at in sent:
            result = stamp.get_result(result_id)
            if result.status == TaskResultStatus.SUCCESSFUL:
                latencies_ms.append((result.return_value - enqueued_at) * 1000)
                if result.started_at is not None:
                    to_started_ms.append((result.started_at.timestamp() - enqueued_at) * 1000)
    if len(latencies_ms) < 2:
        raise SystemExit(f"{system}: only {len(latencies_ms)} of {jobs} latency jobs succeeded")
    cuts = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    return {
        # Where the time goes (medians, ms): the enqueue's commit, and the result's
        # started_at (later_django: written when its worker plans the start, before the
        # start's commit; django-tasks-db: its claim) from the enqueue time.
        "commit_p50": statistics.median(committed_ms),
        "to_started_at_p50": statistics.median(to_started_ms) if to_started_ms else None,
        "p50": cuts[49],
        "p95": cuts[94],
        "p99": cuts[98],
        "max": max(latencies_ms),
        "jobs": jobs,
        "completed": len(latencies_ms),
        "failed": failed,
        "send_seconds": round(send_s, 3),
        "worker_problems": problems,
    }


def log_settings():  # type: ignore[no-untyped-def]
    """``override_settings`` adding the retained-log topic to the project's ``LATER``."""
    from django.conf import settings
    from django.test import override_settings

    topics = {LOG_TOPIC: {"partitions": LOG_PARTITIONS}}
    return override_settings(LATER={**settings.LATER, "TOPICS": topics})


def log_batches(records: int) -> list[list[tuple[str, bytes]]]:
    """``records`` records (1,000 keys, ``LOG_PAYLOAD_BYTES`` each) in ``LOG_BATCH`` batches."""
    payload = b"x" * LOG_PAYLOAD_BYTES
    rows = [(f"key-{n % 1000}", payload) for n in range(records)]
    return [rows[start : start + LOG_BATCH] for start in range(0, records, LOG_BATCH)]


def run_log_append(options: argparse.Namespace) -> dict[str, Any]:
    """``--log-records`` records appended with ``append_many`` in batches of 1,000,
    each batch its own transaction -> records/s."""
    from later_django.logs import log

    batches = log_batches(options.log_records)
    with log_settings():
        retained = log(LOG_TOPIC)
        started = time.perf_counter()
        for batch in batches:
            retained.append_many(batch)
        seconds = time.perf_counter() - started
    return {"value": options.log_records / seconds, "seconds": round(seconds, 3)}


def run_log_consume(options: argparse.Namespace) -> dict[str, Any]:
    """``--log-records`` records appended first (not timed), then one member of one
    group polls 1,000 at a time and commits each poll (``commit_records``) until
    it has read them all -> records/s."""
    from later_django.logs import consumer, log

    with log_settings():
        retained = log(LOG_TOPIC)
        for batch in log_batches(options.log_records):
            retained.append_many(batch)
        read = polls = 0
        started = time.perf_counter()
        with consumer("bench", LOG_TOPIC, member_id="bench-1") as member:
            while read < options.log_records:
                records = member.poll(limit=LOG_BATCH)
                if records:
                    member.commit_records(records)
                read += len(records)
                polls += 1
        seconds = time.perf_counter() - started
    return {"value": read / seconds, "seconds": round(seconds, 3), "polls": polls}


def driver(scenario: str, options: argparse.Namespace) -> None:
    import django

    django.setup()
    log_dir = Path(options.log_dir)
    system = os.environ["BENCH_SYSTEM"]
    if scenario == "enqueue":
        result = run_enqueue(system, options, log_dir)
    elif scenario == "enqueue_in_tx":
        result = run_enqueue_in_tx(system, options, log_dir)
    elif scenario == "enqueue_many":
        result = run_enqueue_many(system, options, log_dir)
    elif scenario == "drain":
        result = run_drain(system, options, log_dir)
    elif scenario == "log_append":
        result = run_log_append(options)
    elif scenario == "log_consume":
        result = run_log_consume(options)
    elif scenario == "partition_drain":
        result = run_partition_drain(options, log_dir)
    elif scenario == "drain_limited":
        result = run_drain(system, options, log_dir)
    elif scenario == "enqueue_unique":
        result = run_enqueue_unique(options)
    elif scenario in ("fan_in", "batch"):
        result = fan_in.run(options, log_dir, sys.modules[__name__], scenario)
    elif scenario == "chain_results":
        result = chain_results.run(options, log_dir, sys.modules[__name__])
    elif scenario == "drain_backlog" or scenario.startswith(backlog.BUILD_PREFIX):
        result = backlog.driver(scenario, options, log_dir, sys.modules[__name__])
    else:
        result = run_latency(system, options, log_dir)
    print(json.dumps(result), flush=True)


# --- the orchestrator: databases, drivers, figures ---


def postgres_admin(url: str):  # type: ignore[no-untyped-def]
    import dj_database_url

    from bench.django_setup import admin_connection

    database = dj_database_url.parse(url)
    return admin_connection(database), database["NAME"]


def mariadb_admin(url: str):  # type: ignore[no-untyped-def]
    """An autocommit MySQLdb connection to the server of ``url`` (no database chosen),
    to create and drop the bench's database; and that database's name."""
    import dj_database_url
    import MySQLdb

    database = dj_database_url.parse(url)
    admin = MySQLdb.connect(
        host=database.get("HOST") or "127.0.0.1",
        port=int(database.get("PORT") or 3306),
        user=database.get("USER") or "root",
        password=database.get("PASSWORD") or "",
        charset="utf8mb4",
    )
    admin.autocommit(True)
    return admin, database["NAME"]


@contextlib.contextmanager
def fresh_database(db: str, options: argparse.Namespace, directory: Path, label: str):  # type: ignore[no-untyped-def]
    """Yields the URL of an empty database, dropped (or deleted) afterwards."""
    if db == "sqlite":
        path = directory / f"{label}.sqlite3"
        try:
            yield f"sqlite:///{path}"
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    if db == "mariadb":
        admin, name = mariadb_admin(options.mariadb_url)
        quoted = "`" + name.replace("`", "``") + "`"
        try:
            admin.query(f"DROP DATABASE IF EXISTS {quoted}")
            admin.query(f"CREATE DATABASE {quoted} CHARACTER SET utf8mb4")
            try:
                yield options.mariadb_url
            finally:
                admin.query(f"DROP DATABASE IF EXISTS {quoted}")
        finally:
            admin.close()
        return
    admin, name = postgres_admin(options.postgres_url)
    quoted = '"' + name.replace('"', '""') + '"'
    with admin:
        admin.execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {quoted}")
        try:
            yield options.postgres_url
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")


def run_scenario(
    system: str, db: str, scenario: str, options: argparse.Namespace, directory: Path, run: int
) -> dict[str, Any]:
    label = f"{scenario}-{system}-{run}"
    extra_env = {}
    if scenario == "partition_drain":
        extra_env["BENCH_TOPICS"] = json.dumps({PARTITION_TOPIC: {"partitions": PARTITION_COUNT}})
    if options.worker_poll_interval is not None:
        extra_env["BENCH_WORKER_POLL_INTERVAL"] = str(options.worker_poll_interval)
    if scenario == "drain_limited":
        extra_env["BENCH_QUEUE_LIMITS"] = json.dumps(
            {"default": {"concurrency": LIMITED_CONCURRENCY}}
        )
    with fresh_database(db, options, directory, label) as url:
        migrate(url, system, extra_env)
        result = drive(system, scenario, url, options, directory, label, extra_env)
    for line in result.get("worker_problems", []):
        print(f"[{system} {scenario} run {run + 1}] worker log: {line}", file=sys.stderr)
    return result


def driver_env(system: str, url: str, extra_env: dict[str, str]) -> dict[str, str]:
    """The environment of a driver, its workers and ``migrate``: the system, the
    database, the scenario's settings (``extra_env``), this repository importable."""
    return {
        **os.environ,
        "BENCH_SYSTEM": system,
        "BENCH_DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
        **extra_env,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }


def migrate(url: str, system: str, extra_env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--verbosity", "0"],
        env=driver_env(system, url, extra_env),
        cwd=ROOT,
        check=True,
    )


def drive(
    system: str,
    scenario: str,
    url: str,
    options: argparse.Namespace,
    directory: Path,
    label: str,
    extra_env: dict[str, str],
    **overrides: Any,
) -> dict[str, Any]:
    """Runs the driver of ``scenario`` on the (migrated) database at ``url``; returns
    its JSON result. ``overrides`` replace forwarded options (e.g. ``enqueue_workers``)."""
    forwarded = [
        f"--{name.replace('_', '-')}={overrides.get(name, getattr(options, name))}"
        for name in (
            "enqueue_jobs",
            "bulk_jobs",
            "drain_jobs",
            "drain_timeout",
            "chain_steps",
            "latency_jobs",
            "latency_rate",
            "concurrency",
            "dtdb_interval",
            "log_records",
            "in_tx_jobs",
            "bare_inserts",
            "enqueue_workers",
            "backlog",
            "backlog_batch",
        )
    ]
    if options.metrics_port is not None:
        forwarded.append(f"--metrics-port={options.metrics_port}")
    completed = subprocess.run(
        [
            sys.executable,
            __file__,
            "--driver",
            scenario,
            "--log-dir",
            options.log_dir or str(directory),
            "--label",
            label,
            *forwarded,
        ],
        env=driver_env(system, url, extra_env),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def better_ratio(later: float | None, other: float | None, higher_is_better: bool) -> float | None:
    if not later or not other:
        return None
    return round(later / other if higher_is_better else other / later, 2)


def figures(
    scenario: str, system: str, results: list[dict[str, Any]], options: argparse.Namespace
) -> list[dict[str, Any]]:
    """The JSON lines of one scenario for one system (before ratios)."""
    base = {"system": system}
    with_workers = {
        "drain",
        "latency",
        "rss",
        "partition_drain",
        "drain_limited",
        "fan_in",
        "batch",
        "chain_results",
        *DRAIN_FIGURES,
    }
    if scenario in ENQUEUE_SCENARIOS or scenario == "bare_insert_commit":
        base["enqueue_workers"] = options.enqueue_workers
        if options.enqueue_workers == "on":
            with_workers.add(scenario)
    if system == LATER and scenario in with_workers:
        base["workers"] = f"later_worker --processes 2 --concurrency {options.concurrency}"
        if options.db == "mariadb":  # no notifications: the idle worker polls
            base["worker_poll_interval"] = options.worker_poll_interval or "default (0.05)"
        if options.metrics_port is not None:
            base["workers"] += f" --metrics-port {options.metrics_port}"
    elif system == DTDB and scenario in with_workers:
        base["workers"] = f"2 x db_worker --interval {options.dtdb_interval}"
    elif system == PROC and scenario in with_workers:
        base["workers"] = (
            "2 x procrastinate worker, its defaults: concurrency 1 (one job at a time "
            "per process), LISTEN/NOTIFY, 5 s polling"
        )
    if system == DTDB and scenario in ("enqueue_many", "drain"):
        base["note"] = (
            "django-tasks-db has no bulk API: a loop of enqueue() in one transaction per batch"
        )
    if system == PROC and scenario in ("enqueue_many", "drain"):
        base["note"] = "batch_defer() of 1,000 jobs per call"

    def median_of(key: str, digits: int = 3) -> float | None:
        values = [result[key] for result in results if result.get(key) is not None]
        return round(statistics.median(values), digits) if values else None

    def line(name: str, key: str, unit: str, higher: bool, **extra: Any) -> dict[str, Any]:
        values = [result[key] for result in results]
        usable = [value for value in values if value is not None]
        value = statistics.median(usable) if usable else None
        digits = 1 if unit in ("jobs/s", "MB") else 3 if name in EXACT_MS else 2
        return {
            "scenario": name,
            "db": options.db,
            **base,
            "value": None if value is None else round(value, digits),
            "unit": unit,
            "runs": [None if v is None else round(v, digits) for v in values],
            "higher_is_better": higher,
            **extra,
        }

    problems = {
        "worker_problems": sum(len(result.get("worker_problems", [])) for result in results)
    }
    if scenario == "enqueue":
        return [
            line(
                scenario,
                "value",
                "jobs/s",
                True,
                jobs=results[0]["jobs"],
                ms_per_job=median_of("ms_per_job"),
                bare_insert_commit_ms=median_of("bare_insert_commit_ms"),
                over_bare_ms=median_of("over_bare_ms"),
                **problems,
            )
        ]
    if scenario == "bare_insert_commit":
        return [
            {
                **line(
                    scenario, "bare_insert_commit_ms", "ms", False, inserts=options.bare_inserts
                ),
                "system": "bare " + BARE_DRIVERS[options.db],
                "measured": f"INSERT of one {BARE_PAYLOAD_BYTES}-byte row + COMMIT, no "
                "framework, same database and driver, in later_django's enqueue run",
            }
        ]
    if scenario == "enqueue_in_tx":
        return [
            line(
                scenario,
                "value",
                "jobs/s",
                True,
                jobs=results[0]["jobs"],
                ms_per_call=median_of("ms_per_call"),
                timing=f"{results[0]['jobs']} enqueues in one transaction.atomic(), commit "
                "included",
                **problems,
            )
        ]
    if scenario == "enqueue_many":
        return [line(scenario, "value", "jobs/s", True, jobs=results[0]["jobs"], **problems)]
    if scenario == "enqueue_unique":
        kinds = results[0]["ms_per_job"]
        return [
            line(
                scenario,
                "value",
                "jobs/s",
                True,
                jobs=results[0]["jobs"],
                ms_per_job={
                    kind: round(statistics.median(r["ms_per_job"][kind] for r in results), 3)
                    for kind in kinds
                },
                timing="each enqueue in its own transaction.atomic(), no worker running",
            )
        ]
    if scenario in ("cpu_per_job", "machine_cpu_per_job"):
        measured = (
            "user+system CPU of the worker commands' processes and their children (/proc) "
            "from just before publishing to the last job finished, / jobs finished"
            if scenario == "cpu_per_job"
            else "busy CPU of the whole machine (/proc/stat, all cores, not idle or "
            "iowait: the database server and the driver included) over the same interval, "
            "/ jobs finished"
        )
        key = "cpu_ms_per_job" if scenario == "cpu_per_job" else "machine_cpu_ms_per_job"
        seconds_key = "worker_cpu_seconds" if scenario == "cpu_per_job" else "machine_cpu_seconds"
        return [
            line(
                scenario,
                key,
                "ms",
                False,
                jobs=results[0]["jobs"],
                cpu_seconds=[result[seconds_key] for result in results],
                measured=measured,
            )
        ]
    if scenario in ("log_append", "log_consume"):
        return [
            line(
                scenario,
                "value",
                "records/s",
                True,
                records=options.log_records,
                batch=LOG_BATCH,
                partitions=LOG_PARTITIONS,
                payload_bytes=LOG_PAYLOAD_BYTES,
            )
        ]
    if scenario in ("fan_in", "batch"):
        return fan_in.figures(results, line, scenario)
    if scenario == "chain_results":
        return chain_results.figures(results, line)
    if scenario == "drain_limited":
        return [
            line(
                "drain_limited",
                "value",
                "jobs/s",
                True,
                jobs=results[0]["jobs"],
                concurrency_limit=LIMITED_CONCURRENCY,
                completed=[result["completed"] for result in results],
                seconds=[result["seconds"] for result in results],
                timed_out=any(result["timed_out"] for result in results),
                failed=sum(result["failed"] for result in results),
                worker_problems=sum(len(result["worker_problems"]) for result in results),
            )
        ]
    if scenario == "partition_drain":
        return [
            line(
                "partition_drain",
                "value",
                "jobs/s",
                True,
                jobs=results[0]["jobs"],
                keys=PARTITION_KEYS,
                partitions=PARTITION_COUNT,
                completed=[result["completed"] for result in results],
                seconds=[result["seconds"] for result in results],
                publish_seconds=[result["publish_seconds"] for result in results],
                timed_out=any(result["timed_out"] for result in results),
                failed=sum(result["failed"] for result in results),
                worker_problems=sum(len(result["worker_problems"]) for result in results),
            )
        ]
    if scenario == "drain":
        return [
            line(
                "drain",
                "value",
                "jobs/s",
                True,
                jobs=results[0]["jobs"],
                completed=[result["completed"] for result in results],
                seconds=[result["seconds"] for result in results],
                publish_seconds=[result["publish_seconds"] for result in results],
                timed_out=any(result["timed_out"] for result in results),
                failed=sum(result["failed"] for result in results),
                timing="from the commit of the published jobs to the last finished; "
                "workers started and idle before",
                jobs_rule=f"the same --drain-jobs for every system (default "
                f"{DRAIN_JOBS_COMPARE:,} with --compare, {DRAIN_JOBS_ALONE:,} without)",
                worker_problems=sum(len(result["worker_problems"]) for result in results),
            )
        ]
    if scenario == "rss":
        extra: dict[str, Any] = {
            "job_processes_mb": [result["rss_job_processes_mb"] for result in results],
            "drain_completed": [result["completed"] for result in results],
            "measured": "the highest VmHWM of the worker command's processes at the end of "
            "the drain (later_django: supervisor and its 2 forked workers)",
        }
        if system == LATER:
            extra["supervisor_mb"] = [result["supervisor_rss_mb"] for result in results]
        return [line("rss", "rss_mb", "MB", False, **extra)]
    return [
        line(
            f"latency_{stat}",
            stat,
            "ms",
            False,
            jobs=results[0]["jobs"],
            rate_per_s=options.latency_rate,
            completed=[result["completed"] for result in results],
            commit_p50_ms=[round(result.get("commit_p50") or 0, 2) for result in results],
            to_started_at_p50_ms=[
                None if result.get("to_started_at_p50") is None else round(value, 2)
                for result in results
                for value in [result.get("to_started_at_p50") or 0.0]
            ],
            worker_problems=sum(len(result["worker_problems"]) for result in results),
        )
        for stat in ("p50", "p95", "p99")
    ]


def ensure_package(name: str) -> str:
    """The installed version of ``name``, installing it from PyPI into this
    interpreter's environment (the venv) first when it is missing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        print(f"--compare: installing {name} into this venv", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", name], check=True)
        return version(name)


def installed_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def ratio_meaning(peer: str, higher_is_better: bool) -> str:
    if higher_is_better:
        return f"times better later_django is: later_django / {peer}"
    return f"times better later_django is (lower is better): {peer} / later_django"


def markdown_table(lines: list[dict[str, Any]], peers: list[str]) -> str:
    """One row per figure (and the enqueue lines' per-job ms), a column per system and
    one per peer's ratio; a peer's "skipped" line marks every row of its scenario."""
    rows: dict[str, dict[str, Any]] = {}  # label -> {"scenario": ..., system: value, ...}

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, dict):  # per way, e.g. enqueue_unique's ms_per_job
            return ", ".join(f"{key} {cell(part)}" for key, part in value.items())
        return f"{value:,}" if isinstance(value, int | float) else str(value)

    for line in lines:
        scenario = line["scenario"]
        if line.get("skipped"):
            for row in rows.values():
                if row["scenario"] == scenario or row["scenario"].startswith(f"{scenario}_"):
                    row[line["system"]] = "skipped"
            continue
        system = LATER if scenario == "bare_insert_commit" else line["system"]
        label = f"{scenario} ({line['unit']})"
        if scenario == "bare_insert_commit":
            label = f"bare_insert_commit, {line['system']} (ms)"
        row = rows.setdefault(label, {"scenario": scenario})
        row[system] = line["value"]
        if system != LATER:
            row[f"ratio {system}"] = line.get("ratio")
        for key in ("ms_per_job", "over_bare_ms", "ms_per_call"):
            if key in line:
                rows.setdefault(f"{scenario} {key} (ms)", {"scenario": scenario})[system] = line[
                    key
                ]
    columns = [LATER, *peers, *[f"ratio {peer}" for peer in peers]]
    out = ["| figure | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for label, row in rows.items():
        out.append(f"| {label} | " + " | ".join(cell(row.get(column)) for column in columns) + " |")
    return "\n".join(out)


def run_bloat_scenario(options: argparse.Namespace) -> None:
    """``--scenarios bloat``: ``bench/bloat.py``'s steady run (a throwaway cluster,
    ``--bloat-rate`` jobs/s for ``--bloat-minutes``), then its quick drain of the same
    cluster kind; ``bloat.py`` prints its JSON lines (a sample every 10 s, then the
    summaries: dead tuples per job, peak dead tuples, size over time)."""
    from bench import bloat

    steady = ["--rate", str(options.bloat_rate), "--minutes", str(options.bloat_minutes)]
    for argv in (steady, ["--quick"]):
        bloat.run_bloat(bloat.parse_args(argv))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "mariadb"], default="sqlite")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also run django-tasks-db and (PostgreSQL only) Procrastinate",
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated; default all but the opt-in {OPT_IN_SCENARIOS}",
    )
    parser.add_argument("--bloat-minutes", type=float, default=10.0, help="bloat: steady run")
    parser.add_argument("--bloat-rate", type=float, default=200.0, help="bloat: jobs per second")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--enqueue-jobs", type=int, default=3_000)
    parser.add_argument("--in-tx-jobs", type=int, default=2_000, help="enqueue_in_tx")
    parser.add_argument(
        "--bare-inserts", type=int, default=2_000, help="the bare INSERT+COMMIT beside enqueue"
    )
    parser.add_argument("--bulk-jobs", type=int, default=20_000)
    parser.add_argument(
        "--drain-jobs",
        type=int,
        default=None,
        help=f"drain and partition_drain; default {DRAIN_JOBS_COMPARE:,} with --compare "
        f"(every system drains the same count), {DRAIN_JOBS_ALONE:,} without",
    )
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument(
        "--chain-steps", type=int, default=1_000, help="chain_results: the steps of a chain"
    )
    parser.add_argument("--latency-jobs", type=int, default=500)
    parser.add_argument("--latency-rate", type=float, default=50.0)
    parser.add_argument(
        "--enqueue-workers",
        choices=["on", "off"],
        default="on",
        help="enqueue scenarios with the system's two workers running (on) or none (off)",
    )
    parser.add_argument("--concurrency", type=int, default=16, help="later_worker threads")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="later_worker --metrics-port (the cost of the worker's Prometheus figures)",
    )
    parser.add_argument("--dtdb-interval", type=float, default=0.1, help="db_worker --interval")
    parser.add_argument("--log-records", type=int, default=100_000, help="log_* scenarios")
    parser.add_argument(
        "--backlog",
        type=int,
        default=1_000_000,
        help="backlog scenarios: jobs in each part of the backlog",
    )
    parser.add_argument(
        "--backlog-batch", type=int, default=10_000, help="backlog build: jobs per transaction"
    )
    parser.add_argument("--postgres-url", default="postgres://root@127.0.0.1:5432/bench_later")
    parser.add_argument(
        "--mariadb-url",
        default="mysql://root@127.0.0.1:3306/bench_later",
        help="--db mariadb: this database is dropped and created for every scenario run",
    )
    parser.add_argument(
        "--worker-poll-interval",
        type=float,
        default=None,
        help="later_django's LATER['WORKER_POLL_INTERVAL'] for its workers (seconds; "
        "MariaDB/MySQL, where an idle worker polls); default: later_django's (0.05)",
    )
    parser.add_argument(
        "--table", action="store_true", help="a Markdown table of the figures on stderr at the end"
    )
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    parser.add_argument(
        "--log-dir", help="keep the workers' logs here (default: a temporary directory)"
    )
    parser.add_argument("--label", help=argparse.SUPPRESS)
    options = parser.parse_args()

    if options.driver:
        driver(options.driver, options)
        return

    if options.drain_jobs is None:
        options.drain_jobs = DRAIN_JOBS_COMPARE if options.compare else DRAIN_JOBS_ALONE
    scenarios = [name.strip() for name in options.scenarios.split(",") if name.strip()]
    unknown = sorted(set(scenarios) - set(SCENARIOS) - set(OPT_IN_SCENARIOS))
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {SCENARIOS + OPT_IN_SCENARIOS}")
    refused = [name for name in scenarios if name in POSTGRES_OR_SQLITE_ONLY]
    if options.db == "mariadb" and refused:
        why = "; ".join(f"{name}: {POSTGRES_OR_SQLITE_ONLY[name]}" for name in refused)
        parser.error(f"{refused} cannot run on MariaDB ({why})")
    if "bloat" in scenarios:
        if options.db != "postgres":
            parser.error("the bloat scenario measures PostgreSQL's dead tuples: use --db postgres")
        run_bloat_scenario(options)
        scenarios.remove("bloat")
        if not scenarios:
            return
    systems = [LATER]
    versions: dict[str, str | None] = {}
    skipped: dict[str, str] = {}  # peer -> why
    if options.compare:
        for peer in PEERS:
            if peer in POSTGRES_ONLY and options.db != "postgres":
                skipped[peer] = POSTGRES_ONLY[peer].format(database=DATABASE_NAMES[options.db])
                versions[peer] = installed_version(peer)
                continue
            versions[peer] = ensure_package(peer)
            systems.append(peer)
    peers = [peer for peer in PEERS if peer in versions]
    load = os.getloadavg()[0]
    if load > 0.5:
        print(
            f"warning: load average {load:.2f} before the start: other processes are busy, "
            "the figures will be noisy",
            file=sys.stderr,
        )
    chosen_backlog = [name for name in backlog.SCENARIOS if name in scenarios]
    scenarios = [name for name in scenarios if name not in backlog.SCENARIOS]
    # The drain measures RSS too: run it once for either.
    runs_of = [s for s in SCENARIOS if s in scenarios and s != "rss"]
    if "rss" in scenarios and "drain" not in scenarios:
        runs_of.insert(runs_of.index("latency") if "latency" in runs_of else len(runs_of), "drain")

    printed: list[dict[str, Any]] = []

    def emit(line: dict[str, Any]) -> None:
        printed.append(line)
        print(json.dumps(line), flush=True)

    with tempfile.TemporaryDirectory(prefix="later-bench-") as directory:
        for scenario in runs_of:
            ran = [LATER] if scenario in LATER_ONLY else systems
            results: dict[str, list[dict[str, Any]]] = {system: [] for system in ran}
            for run in range(options.runs):
                for system in ran:  # interleaved, so drift hits all alike
                    results[system].append(
                        run_scenario(system, options.db, scenario, options, Path(directory), run)
                    )
            reported = [scenario] if scenario != "drain" else []
            if scenario == "drain":
                reported = [name for name in DRAIN_FIGURES if name in scenarios or name != "rss"]
                if "drain" not in scenarios:  # run for rss only
                    reported = ["rss"]
            for name in reported:
                lines = {system: figures(name, system, results[system], options) for system in ran}
                for position, later_line in enumerate(lines[LATER]):
                    emit(later_line)
                    for peer in ran[1:]:
                        other = lines[peer][position]
                        other["version"] = versions[peer]
                        other["ratio"] = better_ratio(
                            later_line["value"], other["value"], later_line["higher_is_better"]
                        )
                        other["ratio_meaning"] = ratio_meaning(peer, later_line["higher_is_better"])
                        emit(other)
                if scenario not in LATER_ONLY:
                    for peer, why in skipped.items():
                        emit(
                            {
                                "scenario": name,
                                "db": options.db,
                                "system": peer,
                                "value": None,
                                "skipped": why,
                                "version": versions[peer],
                                "ratio": None,
                            }
                        )
                if name == "enqueue":
                    emit(figures("bare_insert_commit", LATER, results[LATER], options)[0])
        if chosen_backlog:
            backlog.run(chosen_backlog, options, Path(directory), emit, sys.modules[__name__])
    if options.table:
        print(markdown_table(printed, peers), file=sys.stderr)


if __name__ == "__main__":
    main()
