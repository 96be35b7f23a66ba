"""No maintenance pass, and no worker's start, reads a whole table (issue 32).

100,000 jobs on tables never analyzed, written once per database: a bulk no pass
has work in (finished and kept, ready, delayed for a day, queued on partitions;
range members kept for a day), and before each of two rounds 500 rows of each kind
a pass works on (jobs due now, finished jobs expired, keys and range members
expired, leftover index rows for the purge, lapsed execution leases). In each round
every pass the settings switch on runs once, then a burst worker starts on a queue
with nothing in it beside the bulk's ready jobs of other queues: its start-up, its
claims (each served queue's head only, migration 0016) and its first round of every
pass. What each read:

* PostgreSQL, the first round with custom plans, the second with generic ones (a
  worker's session prepares its statements): the deltas of ``pg_stat_user_tables``
  (sequential scans, the rows they read) and ``pg_stat_user_indexes`` (index entries
  read) of the big tables, as every session of the test database flushed them. A
  sequential scan of a big table fails, and so do more index entries than
  ``READ_BOUND``: an index walk bounded only by the namespace reads the table as
  surely as a scan.
* SQLite: every statement the pass ran on this thread, with its parameters, through
  ``EXPLAIN QUERY PLAN``: a ``SCAN`` of a big table (a walk of the whole table or of
  one of its indexes) fails. A ``SEARCH`` bounded only by the namespace says nothing
  of how far it walks, so the virtual machine's steps are counted too.

A pass that reads in proportion to its work reads a few thousand entries at most.
``LATER_EXPLAIN_PASSES=1`` prints every PostgreSQL plan with its actual rows
(``auto_explain``), for a failure's reader.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from later_django.api import enqueue_many
from later_django.conf import later_settings
from later_django.core.clock import now_ms
from later_django.core.keys import job_key, pass_lease_key
from later_django.engine import metrics
from later_django.maintenance import PassContext
from later_django.maintenance.registry import BUILTIN_PASSES
from later_django.storage.stores import stores_for
from later_django.storage.types import Delete, JobIndexRow, RangeAdd, Set
from later_django.worker.runner import Worker, WorkerOptions
from tests.conftest import use_database
from tests.copies import copy_job
from tests.engine import tasks
from tests.maintenance.conftest import NAMESPACE, execute, fetch

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

CHUNK = 10_000
#: The bulk: jobs finished (kept for a week), ready, delayed for a day, and queued on
#: partitions (their index rows: what the purge walks past).
FINISHED, READY, LATER, PARTITIONED = 38_000, 30_000, 20_000, 10_000
#: Each round's work, of each kind: jobs due now, finished jobs expired, keys and range
#: members expired, leftover index rows, lapsed execution leases.
WORK = 500
ROUNDS = 2
JOBS = FINISHED + READY + LATER + PARTITIONED + ROUNDS * 2 * WORK
#: Finished jobs of the bulk with a range member (a continuation) that expires in a day.
RANGE_MEMBERS = 20_000
#: The tables that grow with the jobs.
BIG_TABLES = ("later_storage", "later_storage_range", "later_jobs_index", "later_delivery_queue")
#: Index entries a pass may read of one big table: its work (500 rows of a kind,
#: read a few times over) with room to spare; a tenth of the jobs.
READ_BOUND = JOBS // 10
#: SQLite's steps a pass may take (its virtual machine's instructions): 150,000 for
#: the 500 promotions; the recount of 70,000 index rows and 30,500 messages took
#: 1,200,000.
SQLITE_STEP_BOUND = 400_000
RETENTION_MS = 7 * 24 * 3_600_000


def enqueued_ids(task: Any, count: int) -> list[str]:
    return enqueue_many(task, [((n, 0), {}) for n in range(count)], ids_only=True)


def with_copies(alias: str, job_ids: list[str], count: int) -> list[str]:
    """The one job of ``job_ids`` (enqueued through the API) and ``count - 1`` copies
    of it: the same rows under other ids (``tests/copies.py``)."""
    [job_id] = job_ids
    return [job_id, *copy_job(alias, job_id, count - 1)]


def finished(alias: str, count: int, expire_ms: int) -> list[str]:
    """``count`` finished jobs expiring at ``expire_ms``: enqueued, then what a finish
    writes written here directly (the index row, the record's expiry, no message)."""
    ids = enqueued_ids(tasks.add.using(queue_name="emails"), count)
    execute(alias, "DELETE FROM later_delivery_queue WHERE queue_name = 'emails'")
    stores, now = stores_for(alias), now_ms()
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        stores.index.job_index_upsert(
            NAMESPACE,
            [index_row(job_id, "success", now, date_expire_ms=expire_ms) for job_id in chunk],
        )
        marks = ", ".join(["%s"] * len(chunk))
        execute(
            alias,
            f"UPDATE later_storage SET date_expire_unindexed = %s WHERE key IN ({marks})",
            [expire_ms, *(job_key(NAMESPACE, job_id) for job_id in chunk)],
        )
    return ids


def index_row(job_id: str, stage: str, now: int, **fields: Any) -> JobIndexRow:
    return JobIndexRow(
        job_id=job_id,
        payload_type="tests.engine.tasks.add",
        stage=stage,
        stage_date_ms=now,
        revision=3,
        created_at_ms=now,
        **fields,
    )


def build(alias: str) -> None:
    """The bulk: jobs no pass has anything to do with. Of each kind one job is written
    as the rounds' work is (enqueued through the API, finished here), and the rest are
    its copies: the same rows under other ids (``tests/copies.py``; 100,000 jobs
    enqueued took 10-15 s a database)."""
    stores, now = stores_for(alias), now_ms()
    later = tasks.add.using(run_after=timezone.now() + timedelta(days=1))
    with_copies(alias, enqueued_ids(later, 1), LATER)
    with_copies(alias, enqueued_ids(tasks.add, 1), READY)
    with_copies(alias, finished(alias, 1, now + RETENTION_MS), FINISHED - RANGE_MEMBERS)
    # Finished jobs with a continuation range of one member, kept for a day.
    continued = finished(alias, 1, now + RETENTION_MS)
    stores.kv.apply([RangeAdd(f"{NAMESPACE}-job-{continued[0]}-next", b"c", ttl_seconds=86_400)])
    with_copies(alias, continued, RANGE_MEMBERS)
    # The index rows of queued partitioned jobs (theirs alone: the purge reads the
    # index, and the worker here runs no partition).
    for start in range(0, PARTITIONED, CHUNK):
        stores.index.job_index_upsert(
            NAMESPACE,
            [
                index_row(
                    f"01PARTITIONED{n:013d}",
                    "enqueued",
                    now,
                    topic="orders",
                    partition_id=n % 16,
                    sequence=n // 16 + 1,
                )
                for n in range(start, min(PARTITIONED, start + CHUNK))
            ],
        )
    metrics.accumulator.take()


def add_work(alias: str, round_: int) -> None:
    """``WORK`` rows of each kind a pass works on, due a second from now."""
    stores, now = stores_for(alias), now_ms()
    enqueued_ids(tasks.add.using(run_after=timezone.now() + timedelta(seconds=1)), WORK)
    expired = finished(alias, WORK, now)
    # Keys (cancel requests, unique keys and pass leases expire all the time) and
    # range members, expiring in a moment.
    stores.kv.apply(
        [Set(f"{NAMESPACE}-cancel-r{round_}-{n}", b"", ttl_seconds=0.5) for n in range(WORK)]
        + [
            RangeAdd(f"{NAMESPACE}-job-{expired[0]}-next", b"e%d" % n, ttl_seconds=0.5)
            for n in range(WORK)
        ]
    )
    # Leftovers of earlier versions: index rows of queued jobs on no partition.
    stores.index.job_index_upsert(
        NAMESPACE,
        [index_row(f"01LEFTOVER{round_}{n:015d}", "enqueued", now) for n in range(WORK)],
    )
    # Execution leases that lapsed two hours ago (the purge reads each one's index
    # row: a probe, not a walk of the index).
    execute(
        alias,
        "INSERT INTO later_job_execution"
        " (namespace, job_id, owner, lease_until, attempt, started_at) VALUES "
        + ", ".join(["(%s, %s, 'gone', %s, 1, %s)"] * WORK),
        [value for job_id in expired for value in (NAMESPACE, job_id, now - 7_200_000, now)],
    )
    metrics.accumulator.take()
    time.sleep(1.0)  # what is due or expires in a second now is


def forget_statistics(alias: str) -> None:
    """The big tables as never analyzed (PostgreSQL): their statistics and size
    estimates gone, as before autovacuum's first ANALYZE. The planner then sizes a
    table by its pages alone."""
    names = ", ".join(f"'{name}'::regclass" for name in BIG_TABLES)
    execute(alias, f"DELETE FROM pg_statistic WHERE starelid IN ({names})")
    execute(alias, f"UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid IN ({names})")
    for table in BIG_TABLES:  # and no autovacuum (on a server that runs it) analyzes them
        execute(alias, f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


def remember_statistics(alias: str) -> None:
    """Autovacuum for the big tables as the migrations left it."""
    for table in BIG_TABLES:
        execute(alias, f"ALTER TABLE {table} RESET (autovacuum_enabled)")


def pg_reads(alias: str) -> dict[str, tuple[int, int, int]]:
    """Per big table: (sequential scans, rows they read, index entries read), as
    flushed by every backend of the test database so far."""
    deadline = time.monotonic() + 10
    while fetch(
        alias,
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )[0][0]:
        # A worker's other connections flush their figures when they close.
        assert time.monotonic() < deadline, "other sessions of the test database stayed"
        time.sleep(0.05)
    execute(alias, "SELECT pg_stat_force_next_flush()")  # flushed as this session idles
    execute(alias, "SELECT pg_stat_clear_snapshot()")
    rows = fetch(
        alias,
        "SELECT t.relname, t.seq_scan, t.seq_tup_read,"
        " COALESCE((SELECT sum(i.idx_tup_read) FROM pg_stat_user_indexes i"
        " WHERE i.relid = t.relid), 0)"
        " FROM pg_stat_user_tables t WHERE t.relname = ANY(%s)",
        [list(BIG_TABLES)],
    )
    return {name: (int(scans), int(read), int(entries)) for name, scans, read, entries in rows}


@contextmanager
def sqlite_statements(alias: str) -> Iterator[tuple[list[tuple[str, Any]], list[int]]]:
    """Records every statement run on this thread's connection, with its parameters
    (all of them go through Django's cursor while ``force_debug_cursor`` is set), and
    counts SQLite's virtual-machine steps in thousands."""
    statements: list[tuple[str, Any]] = []
    thousands = [0]

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any):
        if not many:
            statements.append((sql, params))
        return execute(sql, params, many, context)

    def step() -> int:
        thousands[0] += 1
        return 0  # go on

    connection = connections[alias]
    connection.ensure_connection()
    forced, connection.force_debug_cursor = connection.force_debug_cursor, True
    connection.connection.set_progress_handler(step, 1_000)
    try:
        with connection.execute_wrapper(record):
            yield statements, thousands
    finally:
        connection.force_debug_cursor = forced
        if connection.connection is not None:
            connection.connection.set_progress_handler(None, 1_000)


def sqlite_full_scans(alias: str, statements: list[tuple[str, Any]]) -> list[str]:
    """The plan lines of ``statements`` that walk a whole big table or one of its
    indexes (``SCAN t``, ``SCAN t USING [COVERING] INDEX i``)."""
    found = []
    with connections[alias].cursor() as cursor:
        for sql, params in statements:
            if (
                not sql.lstrip()
                .upper()
                .startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "WITH"))
            ):
                continue
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            for row in cursor.fetchall():
                detail = row[-1]
                if any(detail.startswith(f"SCAN {table}") for table in BIG_TABLES):
                    found.append(f"{detail}  <-  {sql}")
    return found


def pass_context(alias: str) -> PassContext:
    return PassContext(
        using=alias,
        namespace=NAMESPACE,
        settings=later_settings(),
        owner="test-process",
        deadline=time.monotonic() + 30,
    )


def start_idle_worker() -> None:
    """A worker's start: recurring sync, worker row, topics, partitions, then its
    first loop (every pass is due in a fresh process) on a queue with nothing ready."""
    assert Worker(WorkerOptions(queues=["reports"], burst=True, concurrency=1)).run() == 0


@pytest.fixture(params=["sqlite", "postgres"])
def big_db(request: pytest.FixtureRequest) -> Iterator[str]:
    alias = use_database(request, request.param)
    metrics.accumulator.take()
    postgres = connections[alias].vendor == "postgresql"
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": alias}):
        started = time.monotonic()
        build(alias)
        print(f"built the bulk on {request.param} in {time.monotonic() - started:.1f} s")
        if postgres:
            (superuser, version), *_ = fetch(
                alias,
                "SELECT rolsuper, current_setting('server_version_num')::int"
                " FROM pg_roles WHERE rolname = current_user",
            )
            if not superuser or version < 150_000:
                pytest.skip("forgetting statistics takes a superuser; the flush, PostgreSQL 15")
            forget_statistics(alias)
        yield alias
        if postgres:
            remember_statistics(alias)
    metrics.accumulator.take()


def free_pass_leases(alias: str) -> None:
    """Every pass due again, as for a worker starting after a quiet spell."""
    stores_for(alias).kv.apply([Delete(pass_lease_key(NAMESPACE, p.name)) for p in BUILTIN_PASSES])


def explain_to_notices(alias: str, notices: list[str]) -> None:
    """(Debugging, ``LATER_EXPLAIN_PASSES=1``) each statement's plan with its actual rows."""
    for setting in (
        "LOAD 'auto_explain'",
        "SET auto_explain.log_min_duration = 0",
        "SET auto_explain.log_analyze = on",
        "SET auto_explain.log_nested_statements = on",
        "SET auto_explain.log_level = notice",
    ):
        execute(alias, setting)
    connections[alias].connection.add_notice_handler(
        lambda diagnostic: notices.append(diagnostic.message_primary)
    )


def reads_on_postgres(alias: str, name: str, run: Callable[[], object]) -> list[str]:
    """Runs ``run``; returns what it read beyond the bounds, and prints what it read."""
    before = pg_reads(alias)
    started = time.monotonic()
    run()
    seconds = time.monotonic() - started
    after = pg_reads(alias)
    problems = []
    for table in BIG_TABLES:
        scans, rows, entries = (a - b for a, b in zip(after[table], before[table], strict=True))
        print(
            f"{name:26} {table:22} sequential scans {scans} ({rows:,} rows),"
            f" index entries {entries:,} ({seconds:.3f} s)"
        )
        if scans or entries > READ_BOUND:
            problems.append(
                f"{name}: {table}: {scans} sequential scans reading {rows:,} rows,"
                f" {entries:,} index entries read"
            )
    return problems


def reads_on_sqlite(alias: str, name: str, run: Callable[[], object]) -> list[str]:
    """Runs ``run``; returns its statements' full scans and too many steps."""
    with sqlite_statements(alias) as (statements, thousands):
        started = time.monotonic()
        run()
        seconds = time.monotonic() - started
    steps = thousands[0] * 1_000
    print(f"{name:26} {len(statements)} statements, {steps:,} steps ({seconds:.3f} s)")
    problems = [f"{name}: {line}" for line in sqlite_full_scans(alias, statements)]
    if steps > SQLITE_STEP_BOUND:
        problems.append(f"{name}: {steps:,} virtual-machine steps")
    return problems


def test_no_pass_reads_a_whole_table(big_db: str) -> None:
    """Each pass, then a worker's start, on the never-analyzed 100,000 jobs; on
    PostgreSQL twice, with custom plans and then with generic ones (a worker's
    session prepares its statements from their fifth run)."""
    alias = big_db
    postgres = connections[alias].vendor == "postgresql"
    settings = later_settings()
    # A pass the settings switch off is not run (``vacuum``, whose SQLite VACUUM
    # rewrites the whole file by definition when an operator switches it on).
    runs: list[tuple[str, Callable[[], object]]] = [
        (p.name, lambda p=p: p.run(pass_context(alias)))
        for p in BUILTIN_PASSES
        if p.interval_for(settings) is not None
    ]
    runs.append(("worker start", lambda: (free_pass_leases(alias), start_idle_worker())))
    notices: list[str] = []
    if postgres and os.environ.get("LATER_EXPLAIN_PASSES"):
        explain_to_notices(alias, notices)
    problems = []
    # PostgreSQL: custom plans, then generic ones (a worker's session prepares its
    # statements from their fifth run); each round with work of its own.
    modes = ("force_custom_plan", "force_generic_plan") if postgres else ("", "")
    assert len(modes) == ROUNDS
    for round_, mode in enumerate(modes):
        add_work(alias, round_)
        if postgres:
            execute(alias, f"SET plan_cache_mode = {mode}")
        for name, run in runs:
            if postgres:
                problems += reads_on_postgres(alias, f"{name} ({mode})", run)
                for notice in notices:
                    print(notice)
                notices.clear()
            else:
                problems += reads_on_sqlite(alias, f"{name} (round {round_ + 1})", run)
    assert not problems, "\n".join(problems)
