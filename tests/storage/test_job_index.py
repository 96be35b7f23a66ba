"""The dashboard job index (``JobIndexStore``) on SQLite, PostgreSQL and MariaDB.

Ports the seed's ``stage_count_tests`` (all but the delivery-queue test, which
lives with the queue, and the 1.5M-row benchmark) and covers the rest of the
index contract: the revision guard, batches, keyset pages, the ``enqueued``
listing from the queue, partitions, continuations, sweep and namespaces.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import msgpack
import pytest
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext

from later_django.admin.job_lists import list_by_stage
from later_django.core.clock import now_ms
from later_django.core.commands import (
    ExecuteJob,
    encode_command,
)
from later_django.core.keys import dependents_key
from later_django.models import DeliveryMessage, StorageRangeItem
from later_django.storage.job_index import JobIndexStore
from later_django.storage.queries.index import LIVE_STAGE_LIST
from later_django.storage.stores import stores_for
from later_django.storage.types import (
    Delete,
    Increment,
    JobIndexRemove,
    JobIndexRow,
    JobIndexUpsert,
    Set,
)
from tests.conftest import use_database
from tests.storage import three_databases
from tests.storage.three_databases import key_column

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

#: A queue message that is not a job: a command tag this release does not know.
OTHER_COMMAND = msgpack.packb({"c": "partition", "topic": "orders"})

HOUR_MS = 3_600_000


def row(
    job_id: str,
    stage: str,
    date_expire_ms: int | None = None,
    *,
    stage_date_ms: int | None = None,
    revision: int = 0,
    **fields: object,
) -> JobIndexRow:
    """An index row of payload type ``t`` that transitioned now (unless told)."""
    now = now_ms()
    return JobIndexRow(
        job_id=job_id,
        payload_type="t",
        stage=stage,
        stage_date_ms=now if stage_date_ms is None else stage_date_ms,
        revision=revision,
        created_at_ms=now,
        date_expire_ms=date_expire_ms,
        **fields,
    )


def count_of(store: JobIndexStore, stage: str, namespace: str = "ns") -> int:
    return store.job_index_stage_counts(namespace).get(stage, 0)


def run_sql(db_alias: str, sql: str, params: list | None = None) -> list[tuple]:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def queue_message(
    db_alias: str,
    payload: bytes,
    *,
    namespace: str = "ns",
    queue_name: str = "default",
    available_at: int,
    leased: bool = False,
) -> DeliveryMessage:
    """Inserts one delivery-queue row directly (claimed when ``leased``)."""
    return DeliveryMessage.objects.using(db_alias).create(
        namespace=namespace,
        queue_name=queue_name,
        payload=payload,
        available_at=available_at,
        lease_owner="worker-1" if leased else None,
        lease_until=available_at + 60_000 if leased else None,
    )


def job_message(job_id: str, payload_type: str = "work") -> bytes:
    return encode_command(ExecuteJob(job_id=job_id, payload_type=payload_type))


def all_pages(list_page, limit: int) -> tuple[list[str], list[int]]:
    """Follows cursors to the end; returns the job ids in order and each page's size."""
    ids: list[str] = []
    sizes: list[int] = []
    cursor = None
    for _ in range(100):
        page = list_page(cursor, limit)
        ids.extend(item.job_id for item in page.items)
        sizes.append(len(page.items))
        if page.next_cursor is None:
            return ids, sizes
        cursor = page.next_cursor
    raise AssertionError("the pages never ended")


# --- the seed's stage_count_tests ---


def test_stage_counts_skip_expired_terminal_rows_and_count_live_ones(db_alias: str) -> None:
    store = stores_for(db_alias).index
    past, future = now_ms() - HOUR_MS, now_ms() + HOUR_MS
    store.job_index_upsert(
        "ns",
        [
            row("a", "delayed"),
            row("b", "delayed"),
            row("c", "running"),
            row("d", "success", future),
            row("e", "success", past),
            row("f", "failed"),
        ],
    )
    # Live stages come from the counters, which production seeds with a recount
    # at startup; finished stages are always read from the index.
    store.job_index_reconcile_stage_counts("ns")

    assert store.job_index_stage_counts("ns") == {
        "delayed": 2,
        "running": 1,
        "success": 1,  # the expired success row does not count
        "failed": 1,
    }


def test_counters_follow_the_index_rows_exactly(db_alias: str) -> None:
    store = stores_for(db_alias).index
    a = row("a", "delayed")
    store.job_index_upsert("ns", [a])
    store.job_index_upsert("ns", [row("b", "delayed")])
    assert count_of(store, "delayed") == 2

    # A job re-saved in the same stage (a rescheduled occurrence, a retry written
    # twice) must not add one every time: the index keeps a single row for it.
    for _ in range(5):
        store.job_index_upsert("ns", [a])
    assert count_of(store, "delayed") == 2, "same-stage re-saves change nothing"

    # A real move: one leaves, one arrives.
    a = replace(a, stage="running", revision=1)
    store.job_index_upsert("ns", [a])
    assert (count_of(store, "delayed"), count_of(store, "running")) == (1, 1)

    # A write the revision guard rejects changes no row, so no counter.
    store.job_index_upsert("ns", [row("a", "delayed", revision=0)])
    assert (count_of(store, "delayed"), count_of(store, "running")) == (1, 1), (
        "a stale write must not move a counter"
    )

    # Finishing leaves the live counters; ``job_index_stage_counts`` reads finished
    # stages from the index (the raw counters count them too, see below).
    a = replace(a, stage="success", revision=2, date_expire_ms=now_ms() + HOUR_MS)
    store.job_index_upsert("ns", [a])
    assert (count_of(store, "running"), count_of(store, "success")) == (0, 1)

    # Deleting a live row (the sweep, a rebuild) takes it off its counter.
    run_sql(db_alias, "DELETE FROM later_jobs_index WHERE namespace = 'ns' AND job_id = 'b'")
    assert count_of(store, "delayed") == 0

    # Namespaces never see each other's counts.
    store.job_index_upsert("other", [row("z", "delayed")])
    assert count_of(store, "delayed") == 0
    assert count_of(store, "delayed", namespace="other") == 1


def test_a_recount_corrects_whatever_the_counters_drifted_to(db_alias: str) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert("ns", [row("a", "delayed")])
    run_sql(db_alias, "UPDATE later_stage_counts SET count = 999")
    run_sql(
        db_alias,
        "INSERT INTO later_stage_counts (namespace, stage, shard, count) "
        "VALUES ('ns', 'waiting', 0, 40)",
    )
    assert count_of(store, "delayed") == 999

    store.job_index_reconcile_stage_counts("ns")

    assert count_of(store, "delayed") == 1
    assert count_of(store, "waiting") == 0
    assert counter_totals(db_alias) == {"delayed": 1}


def counter_totals(db_alias: str, namespace: str = "ns") -> dict[str, int]:
    """The raw ``later_stage_counts`` of a namespace, shards summed; zero totals left out."""
    rows = run_sql(
        db_alias,
        "SELECT stage, SUM(count) FROM later_stage_counts WHERE namespace = %s GROUP BY stage",
        [namespace],
    )
    return {stage: int(total) for stage, total in rows if int(total) != 0}


# --- finished-stage counters (migration 0005) ---


def test_the_counters_follow_finished_rows_in_moves_and_out(db_alias: str) -> None:
    store = stores_for(db_alias).index
    later = now_ms() + HOUR_MS
    store.job_index_upsert(
        "ns",
        [row("a", "running"), row("b", "running"), row("c", "running"), row("d", "success", later)],
    )
    assert counter_totals(db_alias) == {"running": 3, "success": 1}, "an insert adds"

    # running -> success and running -> failed, in one statement (a worker's finish).
    store.job_index_upsert(
        "ns", [row("a", "success", later, revision=1), row("b", "failed", later, revision=1)]
    )
    assert counter_totals(db_alias) == {"running": 1, "success": 2, "failed": 1}

    # failed -> enqueued: an operator's retry of a job that keeps its index row.
    store.job_index_upsert(
        "ns", [row("b", "enqueued", revision=2, topic="orders", partition_id=0, sequence=1)]
    )
    assert counter_totals(db_alias) == {"running": 1, "enqueued": 1, "success": 2}

    # A same-stage re-save and a write the revision guard rejects change nothing.
    store.job_index_upsert("ns", [row("a", "success", later, revision=1)])
    store.job_index_upsert("ns", [row("a", "running", revision=0)])
    assert counter_totals(db_alias) == {"running": 1, "enqueued": 1, "success": 2}

    # A delete (the dashboard's delete of a finished job) subtracts.
    store.job_index_remove("ns", ["d"])
    assert counter_totals(db_alias) == {"running": 1, "enqueued": 1, "success": 1}

    # Expired rows count until the sweep deletes them; the seed's count leaves them out.
    expired = now_ms() - 1_000
    store.job_index_upsert("ns", [row("e", "failed", expired), row("f", "success", expired)])
    assert counter_totals(db_alias) == {"running": 1, "enqueued": 1, "success": 2, "failed": 1}
    assert (count_of(store, "success"), count_of(store, "failed")) == (1, 0)
    assert store.job_index_sweep_expired("ns", now_ms(), 10) == 2
    assert counter_totals(db_alias) == {"running": 1, "enqueued": 1, "success": 1}

    # Another namespace has counters of its own.
    store.job_index_upsert("other", [row("z", "failed", later)])
    assert counter_totals(db_alias, "other") == {"failed": 1}
    assert counter_totals(db_alias) == {"running": 1, "enqueued": 1, "success": 1}


def test_a_recount_repairs_drifted_finished_counters(db_alias: str) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    store.job_index_upsert(
        "ns",
        [
            row("a", "success", t + HOUR_MS),
            row("b", "success", t - 1_000),  # expired, not swept yet: still counted
            row("c", "failed", t + HOUR_MS),
            row("d", "running"),
        ],
    )
    store.job_index_upsert("other", [row("z", "failed", t + HOUR_MS)])
    run_sql(db_alias, "UPDATE later_stage_counts SET count = count + 7 WHERE stage = 'success'")
    run_sql(db_alias, "DELETE FROM later_stage_counts WHERE stage = 'failed'")
    run_sql(
        db_alias,
        "INSERT INTO later_stage_counts (namespace, stage, shard, count) "
        "VALUES ('ns', 'failed', 5, 40)",
    )
    assert counter_totals(db_alias) == {"running": 1, "success": 9, "failed": 40}

    store.job_index_reconcile_stage_counts("ns")

    assert counter_totals(db_alias) == {"failed": 1, "running": 1, "success": 2}
    assert counter_totals(db_alias, "other") == {}, "another namespace is not recounted"
    store.job_index_reconcile_stage_counts("other")
    assert counter_totals(db_alias, "other") == {"failed": 1}


def test_a_bounded_recount_leaves_a_table_of_more_rows_to_its_triggers(db_alias: str) -> None:
    """``max_rows``: what the ``reconcile`` pass asks (decision 115). A table whose
    namespace holds more rows than that is neither recounted nor read further."""
    stores = stores_for(db_alias)
    store = stores.index
    store.job_index_upsert("ns", [row(f"j{n}", "running") for n in range(3)])
    stores.queue.publish("ns", "default", [b"m"] * 2)
    run_sql(db_alias, "UPDATE later_stage_counts SET count = count + 7")
    run_sql(db_alias, "UPDATE later_queue_depth SET ready = ready + 5")

    def ready() -> int:
        return int(run_sql(db_alias, "SELECT SUM(ready) FROM later_queue_depth")[0][0])

    # Three index rows, two messages: only the queue depth is recounted.
    assert store.job_index_reconcile_stage_counts("ns", max_rows=2) == 1
    assert counter_totals(db_alias) == {"running": 10}
    assert ready() == 2
    assert store.job_index_reconcile_stage_counts("ns", max_rows=1) == 0
    assert store.job_index_reconcile_stage_counts("ns", max_rows=3) == 2
    assert counter_totals(db_alias) == {"running": 3}
    assert store.job_index_reconcile_stage_counts("ns") == 2


def test_stage_counts_sum_every_shard_of_a_counter(db_alias: str) -> None:
    store = stores_for(db_alias).index
    run_sql(
        db_alias,
        "INSERT INTO later_stage_counts (namespace, stage, shard, count) VALUES "
        "('ns', 'running', 3, 2), ('ns', 'running', 5, 1), ('ns', 'waiting', 1, 4), "
        "('ns', 'waiting', 2, -4), ('ns', 'enqueued', 7, 1)",
    )
    run_sql(
        db_alias,
        "INSERT INTO later_queue_depth (namespace, queue_name, shard, ready) VALUES "
        "('ns', 'default', 1, 5), ('ns', 'default', 6, -1), ('ns', 'emails', 2, 1)",
    )

    assert store.job_index_stage_counts("ns") == {"running": 3, "enqueued": 5 - 1 + 1 + 1}


def test_concurrent_writers_keep_the_counters_exact(db_alias: str) -> None:
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            store = stores_for(db_alias).index
            for batch in range(5):
                ids = [f"w{worker}-b{batch}-{n}" for n in range(10)]
                with transaction.atomic(using=db_alias):
                    store.job_index_upsert("ns", [row(job_id, "delayed") for job_id in ids])
                store.job_index_upsert(
                    "ns", [row(job_id, "running", revision=1) for job_id in ids[:4]]
                )
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    store = stores_for(db_alias).index
    assert store.job_index_stage_counts("ns") == {"delayed": 4 * 5 * 6, "running": 4 * 5 * 4}
    store.job_index_reconcile_stage_counts("ns")
    assert store.job_index_stage_counts("ns") == {"delayed": 120, "running": 80}


class _AfterFirstStatement:
    """The driver of a store, with ``hook`` run once after its first ``execute``."""

    def __init__(self, driver: Any, hook: Callable[[], None]) -> None:
        self._driver, self._hook = driver, hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    def execute(self, sql: str, params: Any = None) -> Any:
        result = self._driver.execute(sql, params)
        hook, self._hook = self._hook, lambda: None
        hook()
        return result


@pytest.fixture(params=["postgres", "mariadb"])
def server_alias(request: pytest.FixtureRequest) -> str:
    """PostgreSQL, then MariaDB: the databases whose writers commit concurrently."""
    return use_database(request, request.param)


def test_a_writer_committing_inside_the_recount_is_counted_once(server_alias: str) -> None:
    """PostgreSQL and MariaDB (SQLite's one writer cannot commit inside another's
    transaction): a writer commits a row whose counter row it creates, between the
    recount's statements, and is counted exactly once."""
    store = stores_for(server_alias).index
    store.job_index_upsert("ns", [row("a", "delayed")])
    assert counter_totals(server_alias) == {"delayed": 1}

    def commit_a_waiting_row() -> None:
        def write() -> None:
            try:
                stores_for(server_alias).index.job_index_upsert("ns", [row("w", "waiting")])
            finally:
                connections.close_all()

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(timeout=10)
        assert not writer.is_alive(), "the writer was blocked by the recount"

    hooked = JobIndexStore(
        _AfterFirstStatement(stores_for(server_alias).driver, commit_a_waiting_row)
    )
    hooked.job_index_reconcile_stage_counts("ns")

    assert counter_totals(server_alias) == {"delayed": 1, "waiting": 1}
    store.job_index_reconcile_stage_counts("ns")
    assert counter_totals(server_alias) == {"delayed": 1, "waiting": 1}


def test_a_recount_beside_concurrent_writers_leaves_the_counters_exact(db_alias: str) -> None:
    """The recount runs while writers commit index rows and queue messages: every
    writer that commits between its reads is counted once, not twice (replacing
    the counters with a recount did count twice a writer that created its counter
    row meanwhile) and not zero times."""
    errors: list[BaseException] = []
    writing = threading.Event()
    writing.set()
    recounts = 0

    def writer(worker: int) -> None:
        try:
            stores = stores_for(db_alias)
            for batch in range(40):
                ids = [f"w{worker}-b{batch}-{n}" for n in range(3)]
                with transaction.atomic(using=db_alias):
                    stores.index.job_index_upsert("ns", [row(job_id, "delayed") for job_id in ids])
                    stores.queue.publish("ns", f"q{worker}", [b"m"])
                    # Commits spread over the recount's statements.
                    time.sleep(random.random() / 1000)
                stores.index.job_index_upsert("ns", [row(ids[0], "running", revision=1)])
                # Room for the recount between batches (SQLite has one writer at a time).
                time.sleep(0.002)
                if batch % 8 == 7:
                    # On a loaded machine SQLite's writers can starve the recount: every
                    # eighth batch, each writer waits (5 s at most) for one more recount,
                    # so at least five run among the writes.
                    deadline = time.monotonic() + 5
                    while recounts <= batch // 8 and time.monotonic() < deadline:
                        time.sleep(0.005)
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            connections.close_all()

    def recounter() -> None:
        nonlocal recounts
        try:
            store = stores_for(db_alias).index
            while writing.is_set():
                store.job_index_reconcile_stage_counts("ns")
                recounts += 1
                time.sleep(0.003)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(worker,)) for worker in range(3)]
    checker = threading.Thread(target=recounter)
    checker.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    writing.clear()
    checker.join(timeout=60)

    assert errors == []
    assert recounts >= 5, f"the recount ran while the writers wrote ({recounts})"
    store = stores_for(db_alias).index
    expected = {"delayed": 3 * 40 * 2, "running": 3 * 40, "enqueued": 3 * 40}
    assert store.job_index_stage_counts("ns") == expected
    store.job_index_reconcile_stage_counts("ns")
    assert store.job_index_stage_counts("ns") == expected


def test_one_statement_moving_thousands_of_rows_keeps_the_counters_exact(db_alias: str) -> None:
    """Migration 0009: an UPDATE's counter deltas are new rows minus old rows per
    stage (no join of the transition tables, which took 40 s at 10,000 rows under
    the nested-loop plan PL/pgSQL kept): rows that moved count, rows re-saved in
    their stage do not, and the queue depth follows claims and hand-backs."""
    store = stores_for(db_alias).index
    store.job_index_upsert("ns", [row(f"j{n}", "delayed") for n in range(3_000)])
    store.job_index_upsert("ns", [row("first", "delayed")])  # a small statement first
    moved = [row(f"j{n}", "running", revision=1) for n in range(2_000)]
    kept = [row(f"j{n}", "delayed", revision=1) for n in range(2_000, 3_000)]
    store.job_index_upsert("ns", moved + kept)
    assert counter_totals(db_alias) == {"delayed": 1_001, "running": 2_000}

    queue = stores_for(db_alias).queue
    queue.publish("ns", "default", [b"m"] * 3_000)
    assert queue.depth("ns") == 3_000
    # MySQL refuses LIMIT in an IN subquery, and has the UPDATE's own instead.
    mysql = connections[db_alias].vendor == "mysql"
    first = (
        "ORDER BY sequence LIMIT {n}"
        if mysql
        else (
            "WHERE sequence IN (SELECT sequence FROM later_delivery_queue {where} "
            "ORDER BY sequence LIMIT {n})"
        )
    )
    run_sql(
        db_alias,
        "UPDATE later_delivery_queue SET lease_owner = 'w', lease_until = %s "
        + first.format(n=2000, where=""),
        [now_ms() + HOUR_MS],
    )
    assert queue.depth("ns") == 1_000
    run_sql(
        db_alias,
        "UPDATE later_delivery_queue SET lease_owner = NULL, lease_until = NULL "
        + ("WHERE lease_until IS NOT NULL " if mysql else "")
        + first.format(n=500, where="WHERE lease_until IS NOT NULL"),
    )
    run_sql(db_alias, "UPDATE later_delivery_queue SET priority = priority")
    assert queue.depth("ns") == 1_500


def test_the_purge_removes_only_rows_nothing_reads_any_more(db_alias: str) -> None:
    store = stores_for(db_alias).index
    dead = {
        "ns-all-jobs": 7,
        "ns-stage-enqueued-jobs": 5,
        "ns-stage-running-jobs": 3,
        "ns-stats-job-in-success": 4,
        "ns-stats-partition-jobs-analytics-0": 6,
    }
    live = {
        "ns-stage-delayed-jobs": 2,
        "ns-stage-requeued-jobs": 2,
        "ns-stats-active-workers": 2,
        "ns-all-recurring-jobs": 2,
        "ns-job-abc-next": 2,
        "other-all-jobs": 3,
        # Just outside the half-open range of the "stats-job-in-" prefix.
        "ns-stats-job-in.": 1,
        "ns-stats-job-in": 1,
    }
    StorageRangeItem.objects.using(db_alias).bulk_create(
        StorageRangeItem(range_key=key, value=f"v{n}".encode())
        for key, count in {**dead, **live}.items()
        for n in range(count)
    )
    # Index rows: a queued job on the shared queue is dead; a partitioned queued
    # job and every other stage are live.
    store.job_index_upsert(
        "ns",
        [
            row("plain", "enqueued"),
            row("topic-job", "enqueued", topic="t", partition_id=0, sequence=1),
            row("run", "running"),
        ],
    )
    store.job_index_upsert("other", [row("plain-elsewhere", "enqueued")])

    removed = 0
    batches = []
    for _ in range(50):
        # A small batch, as at startup, to exercise the budget across statements.
        batch = store.purge_unused_dashboard_rows("ns", 4)
        assert batch <= 4
        batches.append(batch)
        if batch == 0:
            break
        removed += batch

    assert removed == 7 + 5 + 3 + 4 + 6 + 1, "every dead range row and the queued index row"
    assert batches[:-2] == [4] * (len(batches) - 2), "full batches until the last"
    remaining = run_sql(
        db_alias,
        "SELECT range_key, COUNT(*) FROM later_storage_range GROUP BY range_key ORDER BY range_key",
    )
    assert sorted(remaining) == sorted(live.items())
    assert run_sql(db_alias, "SELECT namespace, job_id FROM later_jobs_index") and sorted(
        run_sql(db_alias, "SELECT namespace, job_id FROM later_jobs_index")
    ) == [("ns", "run"), ("ns", "topic-job"), ("other", "plain-elsewhere")]
    assert count_of(store, "enqueued") == 1, "the purged row left its counter too"


def test_live_stage_count_is_answered_from_the_index_alone(db_alias: str, vendor: str) -> None:
    query = (
        "SELECT stage, COUNT(*) FROM later_jobs_index "
        f"WHERE namespace = %s AND stage IN ({LIVE_STAGE_LIST}) GROUP BY stage"
    )
    if vendor == "sqlite":
        plan = run_sql(db_alias, "EXPLAIN QUERY PLAN " + query, ["ns"])
        details = [detail for *_, detail in plan]
        assert any("COVERING INDEX later_jobs_index_stage_idx" in d for d in details), (
            f"live stage count must not read the table: {details}"
        )
        return
    stores_for(db_alias).index.job_index_upsert(
        "ns", [row(f"job-{n:03}", ("delayed", "running", "success")[n % 3]) for n in range(300)]
    )
    if vendor == "mysql":
        run_sql(db_alias, "ANALYZE TABLE later_jobs_index")
        ((_, _, table, kind, _, key, *_, extra),) = run_sql(db_alias, "EXPLAIN " + query, ["ns"])
        assert (table, kind, key) == ("later_jobs_index", "range", "later_jobs_index_stage_idx")
        assert "Using index" in extra, extra  # the index alone: no row of the table read
        return
    run_sql(db_alias, "VACUUM ANALYZE later_jobs_index")  # fills the visibility map
    with transaction.atomic(using=db_alias):
        run_sql(db_alias, "SET LOCAL enable_seqscan = off")
        run_sql(db_alias, "SET LOCAL enable_bitmapscan = off")
        plan = "\n".join(line for (line,) in run_sql(db_alias, "EXPLAIN " + query, ["ns"]))
    assert "Index Only Scan using later_jobs_index_stage_idx" in plan, plan


# --- upserts and removes ---


def test_an_upsert_applies_only_when_its_revision_is_at_least_the_stored_one(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert(
        "ns", [row("a", "running", revision=3, wait_ms=40, wait_mode="regular", parent_job_id="p")]
    )

    store.job_index_upsert("ns", [row("a", "delayed", revision=2)])
    assert store.job_index_get("ns", "a").stage == "running", "an older revision is ignored"

    store.job_index_upsert("ns", [row("a", "requeued", revision=3)])
    stored = store.job_index_get("ns", "a")
    assert (stored.stage, stored.revision) == ("requeued", 3), "an equal revision applies"
    assert (stored.wait_ms, stored.wait_mode, stored.parent_job_id) == (40, "regular", "p"), (
        "null wait and parent keep the stored values"
    )

    store.job_index_upsert("ns", [row("a", "success", now_ms() + HOUR_MS, revision=4, wait_ms=7)])
    stored = store.job_index_get("ns", "a")
    assert (stored.stage, stored.revision, stored.wait_ms) == ("success", 4, 7)


def test_a_batch_is_one_statement_and_keeps_the_highest_revision_of_a_repeated_job(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    batch = [
        row("b", "enqueued", revision=1, topic="orders", partition_id=2, sequence=5),
        row("a", "running", revision=2, stage_date_ms=t),
        row("a", "enqueued", revision=1),
        row("c", "success", t + HOUR_MS, revision=6, wait_ms=12, wait_mode="sequential"),
        row("a", "requeued", revision=2, stage_date_ms=t + 1),  # a tie: the later one wins
    ]
    with CaptureQueriesContext(connections[db_alias]) as captured:
        store.job_index_upsert("ns", batch)

    inserts = [q for q in captured.captured_queries if "INSERT INTO later_jobs_index" in q["sql"]]
    assert len(inserts) == 1
    assert store.job_index_get("ns", "a") == replace(batch[4])
    assert store.job_index_get("ns", "b") == batch[0]
    assert store.job_index_get("ns", "c") == batch[3]
    assert store.job_index_stage_counts("ns") == {"requeued": 1, "enqueued": 1, "success": 1}


def test_a_large_batch_is_written_whole(db_alias: str) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert("ns", [row(f"job-{n:05}", "delayed") for n in range(3_000)])
    assert count_of(store, "delayed") == 3_000


def test_remove_deletes_the_given_rows_and_ignores_absent_ones(db_alias: str) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert("ns", [row("a", "delayed"), row("b", "delayed"), row("c", "running")])
    store.job_index_upsert("other", [row("a", "delayed")])

    store.job_index_remove("ns", ["a", "c", "absent", "a"])
    store.job_index_remove("ns", [])

    assert store.job_index_get("ns", "a") is None
    assert store.job_index_get("ns", "c") is None
    assert store.job_index_get("ns", "b") is not None
    assert store.job_index_get("other", "a") is not None
    assert store.job_index_stage_counts("ns") == {"delayed": 1}


def test_index_changes_apply_as_if_one_after_another_in_two_statements(db_alias: str) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert("ns", [row("gone", "delayed"), row("back", "running", revision=9)])
    changes = [
        JobIndexUpsert(row("new", "delayed")),
        JobIndexRemove("gone"),
        JobIndexUpsert(row("new", "running", revision=1)),
        JobIndexUpsert(row("short-lived", "delayed")),
        JobIndexRemove("short-lived"),
        # Removed then written again: the new row replaces the old one whatever
        # its revision, as two separate calls would.
        JobIndexRemove("back"),
        JobIndexUpsert(row("back", "delayed", revision=0)),
    ]
    with CaptureQueriesContext(connections[db_alias]) as captured:
        store.apply_index_changes("ns", changes)

    writes = [q for q in captured.captured_queries if q["sql"].startswith(("INSERT", "DELETE"))]
    assert len(writes) == 2
    assert store.job_index_get("ns", "new").stage == "running"
    assert store.job_index_get("ns", "gone") is None
    assert store.job_index_get("ns", "short-lived") is None
    back = store.job_index_get("ns", "back")
    assert (back.stage, back.revision) == ("delayed", 0)
    assert store.job_index_stage_counts("ns") == {"running": 1, "delayed": 1}


def test_get_returns_a_row_even_after_it_expired(db_alias: str) -> None:
    store = stores_for(db_alias).index
    expired = row("old", "success", now_ms() - HOUR_MS, revision=4)
    store.job_index_upsert("ns", [expired])

    assert store.job_index_get("ns", "old") == expired
    assert store.job_index_get("ns", "missing") is None
    assert store.job_index_get("other", "old") is None


# --- listing by stage ---


def test_stage_list_is_newest_first_and_leaves_out_expired_rows(db_alias: str) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    store.job_index_upsert(
        "ns",
        [
            row("old", "success", t + HOUR_MS, stage_date_ms=t - 3_000),
            row("new", "success", t + HOUR_MS, stage_date_ms=t - 1_000),
            row("middle", "success", None, stage_date_ms=t - 2_000),
            row("expired", "success", t - 1, stage_date_ms=t),
            row("failed", "failed", t + HOUR_MS, stage_date_ms=t),
        ],
    )

    page = store.job_index_list_by_stage("ns", "success")

    assert [item.job_id for item in page.items] == ["new", "middle", "old"]
    assert page.next_cursor is None


def test_stage_pages_neither_skip_nor_repeat_rows_sharing_one_timestamp(db_alias: str) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    same_moment = [row(f"job-{n:02}", "running", stage_date_ms=t) for n in range(23)]
    store.job_index_upsert(
        "ns",
        [
            *same_moment,
            row("newest", "running", stage_date_ms=t + 1),
            row("oldest", "running", stage_date_ms=t - 1),
        ],
    )

    ids, sizes = all_pages(
        lambda cursor, limit: store.job_index_list_by_stage("ns", "running", cursor, limit), 5
    )

    expected = ["newest", *sorted((r.job_id for r in same_moment), reverse=True), "oldest"]
    assert ids == expected
    assert sizes == [5, 5, 5, 5, 5]


def test_an_exact_last_page_says_there_is_no_further_page(db_alias: str) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert("ns", [row(f"job-{n}", "delayed") for n in range(4)])

    first = store.job_index_list_by_stage("ns", "delayed", None, 2)
    second = store.job_index_list_by_stage("ns", "delayed", first.next_cursor, 2)

    assert first.next_cursor is not None
    assert [item.job_id for item in second.items] == ["job-1", "job-0"]
    assert second.next_cursor is None


def test_a_cursor_that_is_not_one_is_refused(db_alias: str) -> None:
    store = stores_for(db_alias).index
    for stage, cursor in [("running", "nonsense"), ("running", "i:x:y"), ("enqueued", "q:x")]:
        with pytest.raises(ValueError, match="cursor"):
            list_by_stage(store, "ns", stage, cursor)
    with pytest.raises(ValueError, match="cursor"):
        store.job_index_list_by_partition("ns", "orders", 0, "x")


def test_enqueued_lists_unclaimed_queue_jobs_newest_first_then_partitioned_rows(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    sent: dict[str, int] = {}

    def send(job_id: str, payload: bytes | None = None, **options: object) -> None:
        message = queue_message(
            db_alias, payload or job_message(job_id), available_at=t + len(sent), **options
        )
        sent[job_id] = message.available_at

    for n in range(4):
        send(f"job-0{n}")
    send("junk", b"\xc1 not msgpack")
    send("partition-ready", OTHER_COMMAND)
    send("maintenance", msgpack.packb({"c": "maintenance", "pass": "sweep"}))
    send("claimed-job", leased=True)
    for n in range(4, 7):
        send(f"job-0{n}")
    send("elsewhere", namespace="other")
    send("emails-job", queue_name="emails")
    store.job_index_upsert(
        "ns",
        [
            row("part-a", "enqueued", stage_date_ms=t + 1, topic="orders", partition_id=0),
            row("part-b", "enqueued", stage_date_ms=t + 2, topic="orders", partition_id=1),
            row("leftover", "enqueued", stage_date_ms=t + 3),  # not on a partition
            row("run", "running"),
        ],
    )

    pages = []
    cursor = None
    for _ in range(10):
        page = list_by_stage(store, "ns", "enqueued", cursor, 4)
        pages.append(page)
        cursor = page.next_cursor
        if cursor is None:
            break
    ids = [item.job_id for page in pages for item in page.items]

    assert ids == [
        "emails-job",
        "job-06",
        "job-05",
        "job-04",
        "job-03",
        "job-02",
        "job-01",
        "job-00",
        "part-b",
        "part-a",
    ]
    assert all(len(page.items) <= 4 for page in pages)
    queued = [item for page in pages for item in page.items if item.job_id.startswith("job")]
    assert all(
        (item.stage, item.payload_type, item.revision, item.topic) == ("enqueued", "work", 0, None)
        and item.stage_date_ms == item.created_at_ms == sent[item.job_id]
        for item in queued
    )


def test_enqueued_list_goes_on_to_partitioned_rows_when_the_queue_fills_a_page(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    for n in range(3):
        queue_message(db_alias, job_message(f"job-{n}"), available_at=t)
    store.job_index_upsert(
        "ns", [row("part-a", "enqueued", topic="orders", partition_id=0, sequence=1)]
    )

    first = list_by_stage(store, "ns", "enqueued", None, 3)
    second = list_by_stage(store, "ns", "enqueued", first.next_cursor, 3)

    assert [item.job_id for item in first.items] == ["job-2", "job-1", "job-0"]
    assert first.next_cursor is not None
    assert [item.job_id for item in second.items] == ["part-a"]
    assert second.next_cursor is None


def test_stage_counts_add_the_job_queues_depth_to_the_partitioned_enqueued_jobs(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    for n in range(3):
        queue_message(db_alias, job_message(f"d{n}"), available_at=t)
    for n in range(2):
        queue_message(db_alias, job_message(f"e{n}"), queue_name="emails", available_at=t)
    queue_message(db_alias, job_message("claimed"), available_at=t, leased=True)
    queue_message(db_alias, job_message("x"), namespace="other", available_at=t)
    store.job_index_upsert(
        "ns",
        [
            row("p1", "enqueued", topic="orders", partition_id=0, sequence=1),
            row("p2", "enqueued", topic="orders", partition_id=1, sequence=1),
        ],
    )

    assert count_of(store, "enqueued") == 3 + 2 + 2
    assert count_of(store, "enqueued", namespace="other") == 1

    run_sql(db_alias, "UPDATE later_queue_depth SET ready = 100")
    run_sql(db_alias, "UPDATE later_stage_counts SET count = -5")
    assert count_of(store, "enqueued") == 100 * 2, "a negative counter part reads as nothing"

    store.job_index_reconcile_stage_counts("ns")

    assert count_of(store, "enqueued") == 7
    depths = run_sql(
        db_alias,
        "SELECT queue_name, SUM(ready) FROM later_queue_depth WHERE namespace = 'ns' "
        "GROUP BY queue_name ORDER BY queue_name",
    )
    assert [(queue, int(ready)) for queue, ready in depths] == [("default", 3), ("emails", 2)]
    assert count_of(store, "enqueued", namespace="other") == 100, "another namespace is untouched"


# --- partitions and continuations ---


def partition_rows(topic: str, partition_id: int, sequences: range) -> list[JobIndexRow]:
    return [
        row(
            f"{topic}-{partition_id}-{sequence}",
            "success",
            topic=topic,
            partition_id=partition_id,
            sequence=sequence,
        )
        for sequence in sequences
    ]


def test_partition_list_pages_from_the_highest_sequence(db_alias: str) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert(
        "ns",
        partition_rows("orders", 0, range(1, 8))
        + partition_rows("orders", 1, range(1, 4))
        + partition_rows("invoices", 0, range(1, 4)),
    )

    ids, sizes = all_pages(
        lambda cursor, limit: store.job_index_list_by_partition("ns", "orders", 0, cursor, limit),
        3,
    )

    assert ids == [f"orders-0-{sequence}" for sequence in range(7, 0, -1)]
    assert sizes == [3, 3, 1]


def test_partition_neighbors_are_the_exactly_adjacent_sequences(db_alias: str) -> None:
    store = stores_for(db_alias).index
    store.job_index_upsert(
        "ns", partition_rows("orders", 0, range(1, 4)) + partition_rows("orders", 0, range(5, 6))
    )

    assert store.job_index_partition_neighbor("ns", "orders", 0, 2, older=True).sequence == 1
    assert store.job_index_partition_neighbor("ns", "orders", 0, 2, older=False).sequence == 3
    assert store.job_index_partition_neighbor("ns", "orders", 0, 3, older=False) is None, (
        "a gap is not skipped over"
    )
    assert store.job_index_partition_neighbor("ns", "orders", 0, 1, older=True) is None
    assert store.job_index_partition_neighbor("ns", "orders", 1, 2, older=True) is None


def test_continuations_are_listed_oldest_first_up_to_the_limit(db_alias: str) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    store.job_index_upsert(
        "ns",
        [
            row("c3", "waiting", stage_date_ms=t + 3, parent_job_id="parent"),
            row("c1", "waiting", stage_date_ms=t + 1, parent_job_id="parent"),
            row("c2", "enqueued", stage_date_ms=t + 2, parent_job_id="parent"),
            row("c4", "waiting", stage_date_ms=t + 4, parent_job_id="parent"),
            row("unrelated", "waiting", stage_date_ms=t, parent_job_id="another"),
            row("orphan", "waiting", stage_date_ms=t),
        ],
    )
    store.job_index_upsert("other", [row("c0", "waiting", stage_date_ms=t, parent_job_id="parent")])

    listed = store.job_index_list_continuations("ns", "parent", 3)

    assert [item.job_id for item in listed] == ["c1", "c2", "c3"]
    assert store.job_index_list_continuations("ns", "nobody", 3) == []


# --- sweep and namespaces ---


def test_the_index_sweep_removes_expired_rows_at_most_limit_at_a_time(db_alias: str) -> None:
    store = stores_for(db_alias).index
    t = now_ms()
    store.job_index_upsert(
        "ns",
        [row(f"expired-{n}", "success", t - 1_000) for n in range(5)]
        + [row("kept-1", "success", t + HOUR_MS), row("kept-2", "failed", t + HOUR_MS)]
        + [row("live", "delayed")],
    )
    store.job_index_upsert("other", [row("expired-elsewhere", "failed", t - 1_000)])

    assert store.job_index_sweep_expired("ns", t, 3) == 3
    assert store.job_index_sweep_expired("ns", t, 3) == 2
    assert store.job_index_sweep_expired("ns", t, 3) == 0

    left = sorted(job_id for (job_id,) in run_sql(db_alias, "SELECT job_id FROM later_jobs_index"))
    assert left == ["expired-elsewhere", "kept-1", "kept-2", "live"]


def test_the_index_sweep_keeps_a_job_its_dependents_counter_holds_and_deletes_records(
    db_alias: str,
) -> None:
    """A job whose dependents counter exists is not swept, however long ago it expired;
    the swept jobs' records go with their rows, unless written live again since (no
    ``date_expire_unindexed``)."""
    stores = stores_for(db_alias)
    store, t = stores.index, now_ms()
    store.job_index_upsert(
        "ns", [row(job_id, "success", t - 1_000) for job_id in ("held", "free", "again")]
    )
    stores.kv.apply(
        [Set(f"ns-job-{job_id}", b"record") for job_id in ("held", "free", "again")]
        + [Increment(dependents_key("ns", "held"))]
    )
    key = key_column(db_alias)
    run_sql(
        db_alias,
        f"UPDATE later_storage SET date_expire_unindexed = %s WHERE {key} IN (%s, %s)",
        [t - 1_000, "ns-job-held", "ns-job-free"],
    )

    assert store.job_index_sweep_expired("ns", t, 10) == 2
    assert store.job_index_get("ns", "held") is not None
    assert (store.job_index_get("ns", "free"), store.job_index_get("ns", "again")) == (None, None)
    records = run_sql(db_alias, f"SELECT {key} FROM later_storage WHERE {key} LIKE 'ns-job-%%'")
    assert sorted(records) == [("ns-job-again",), ("ns-job-held",), ("ns-job-held-dependents",)]

    stores.kv.apply([Delete(dependents_key("ns", "held"))])
    assert store.job_index_sweep_expired("ns", t, 10) == 1
    assert store.job_index_get("ns", "held") is None
    assert store.job_index_sweep_expired("ns", t, 10) == 0


def test_concurrent_index_sweeps_take_disjoint_rows_without_waiting(
    request: pytest.FixtureRequest,
) -> None:
    """MariaDB's sweep locks the rows it deletes first (``FOR UPDATE SKIP LOCKED``): a
    second sweeper, while the first has not committed, skips the first one's rows
    instead of waiting for them, and neither counts a row the other deleted."""
    alias = use_database(request, "mariadb")
    store, t = stores_for(alias).index, now_ms()
    store.job_index_upsert("ns", [row(f"old-{n}", "success", t - 10_000 + n) for n in range(6)])
    second: list[int] = []

    def sweep_beside() -> None:
        try:
            started = time.monotonic()
            second.append(stores_for(alias).index.job_index_sweep_expired("ns", t, 10))
            second.append(int(time.monotonic() - started < 5))
        finally:
            connections.close_all()

    with transaction.atomic(using=alias):
        assert store.job_index_sweep_expired("ns", t, 4) == 4
        beside = threading.Thread(target=sweep_beside)
        beside.start()
        beside.join(timeout=30)
    assert second == [2, 1], "the second sweeper took the two rows left, without waiting"
    assert not run_sql(alias, "SELECT job_id FROM later_jobs_index WHERE namespace = 'ns'")


def test_namespaces_never_see_each_others_jobs(db_alias: str) -> None:
    store = stores_for(db_alias).index
    mine = row("job", "running", topic="orders", partition_id=0, sequence=1, parent_job_id="p")
    store.job_index_upsert("ns", [mine])

    assert store.job_index_get("other", "job") is None
    assert store.job_index_list_by_stage("other", "running").items == []
    assert store.job_index_list_by_partition("other", "orders", 0).items == []
    assert store.job_index_list_continuations("other", "p", 10) == []
    assert store.job_index_stage_counts("other") == {}
    store.job_index_remove("other", ["job"])
    assert store.job_index_get("ns", "job") == mine
