"""The built-in passes on both databases: sweep, promote, reconcile, queue samples, purge."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from later_django.compat.tasks import TaskResultStatus
from later_django.core.clock import MINUTE_MS, minute_bucket, now_ms
from later_django.core.keys import pass_lease_key
from later_django.maintenance import PassContext, purge, queue_sample, sweep
from later_django.storage.stores import stores_for
from later_django.storage.types import (
    METRIC_RETENTION_MINUTES,
    JobIndexMetricsBatch,
    JobIndexRow,
    RangeAdd,
    Set,
    TaskMinuteSample,
    WorkerRow,
)
from tests.engine import tasks
from tests.maintenance.conftest import NAMESPACE, execute, fetch, make_runner
from tests.storage.three_databases import key_column

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

HOUR_MS = 60 * MINUTE_MS


def context(alias: str, budget_seconds: float = 30.0) -> PassContext:
    from later_django.conf import later_settings

    return PassContext(
        using=alias,
        namespace=NAMESPACE,
        settings=later_settings(),
        owner="test-process",
        deadline=time.monotonic() + budget_seconds,
    )


def index_row(job_id: str, stage: str, *, expire_ms: int | None = None, **extra) -> JobIndexRow:
    now = now_ms()
    return JobIndexRow(
        job_id=job_id,
        payload_type="tests.engine.tasks.add",
        stage=stage,
        stage_date_ms=now,
        revision=1,
        created_at_ms=now,
        date_expire_ms=expire_ms,
        **extra,
    )


def count(alias: str, sql: str, params: list | None = None) -> int:
    return int(fetch(alias, sql, params)[0][0])


# --- sweep ---


def fill_expired(alias: str) -> None:
    """35 expired values, 5 expired range members, 25 expired index rows, and live
    ones of each that must stay."""
    stores = stores_for(alias)
    stores.kv.apply(
        [Set(f"sweep-dead-{n:03}", b"x", ttl_seconds=0) for n in range(35)]
        + [Set(f"sweep-live-{n}", b"x", ttl_seconds=3600) for n in range(3)]
        + [RangeAdd("sweep-range", f"dead-{n}".encode(), ttl_seconds=0) for n in range(5)]
        + [RangeAdd("sweep-range", b"live", ttl_seconds=3600)]
    )
    past = now_ms() - 1
    stores.index.job_index_upsert(
        NAMESPACE,
        [index_row(f"dead{n:03}", "success", expire_ms=past) for n in range(25)]
        + [index_row("live1", "success", expire_ms=past + HOUR_MS), index_row("live2", "running")],
    )


def expired_left(alias: str) -> tuple[int, int, int]:
    now = now_ms()
    return (
        count(
            alias,
            f"SELECT COUNT(*) FROM later_storage WHERE {key_column(alias)} LIKE 'sweep-dead-%%'",
        ),
        count(
            alias,
            "SELECT COUNT(*) FROM later_storage_range WHERE date_expire IS NOT NULL"
            " AND date_expire <= %s",
            [now],
        ),
        count(alias, "SELECT COUNT(*) FROM later_jobs_index WHERE job_id LIKE 'dead%%'"),
    )


def test_sweep_deletes_one_bounded_batch_per_call_when_out_of_time(
    alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep, "SWEEP_BATCH", 10)
    fill_expired(alias)
    removed = sweep.sweep(context(alias, budget_seconds=-1))
    assert removed == 20
    assert expired_left(alias) == (25, 5, 15)


def test_sweep_loops_until_every_expired_row_is_gone_and_keeps_live_ones(
    alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep, "SWEEP_BATCH", 10)
    fill_expired(alias)
    runs = make_runner(alias, "sweep").run_due()
    assert [(run.name, run.done, run.error) for run in runs] == [("sweep", 35 + 5 + 25, None)]
    assert expired_left(alias) == (0, 0, 0)
    stores = stores_for(alias)
    assert stores.kv.get("sweep-live-0") is not None
    assert stores.kv.range_count("sweep-range") == 1
    assert stores.index.job_index_get(NAMESPACE, "live1") is not None
    assert stores.index.job_index_get(NAMESPACE, "live2") is not None


def test_sweep_deletes_attempt_rows_past_the_metric_retention_in_bounded_batches(
    alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep, "SWEEP_BATCH", 10)
    now = now_ms()
    stale = now - (METRIC_RETENTION_MINUTES + 1) * MINUTE_MS
    attempts = [
        TaskMinuteSample("t", "succeeded", "", stale - n * MINUTE_MS, 1, 1, 1, 1, "")
        for n in range(23)
    ]
    attempts.append(TaskMinuteSample("t", "succeeded", "", now, 1, 1, 1, 1, ""))
    stores_for(alias).metrics.record_batch(NAMESPACE, JobIndexMetricsBatch(task_minutes=attempts))

    assert sweep.sweep(context(alias, budget_seconds=-1)) == 10, "one batch when out of time"
    runs = make_runner(alias, "sweep").run_due()

    assert [(run.name, run.done, run.error) for run in runs] == [("sweep", 13, None)]
    left = fetch(alias, "SELECT minute_bucket FROM later_task_minute")
    assert left == [(minute_bucket(now),)]


def test_sweep_deletes_a_finished_job_with_its_record_once_its_retention_passed(
    alias: str,
) -> None:
    """A finished record keeps its expiry in ``date_expire_unindexed`` (migration 0013):
    the sweep finds it through the job's index row and deletes both; a job that is
    still retained, and a record written live again, are kept."""
    from later_django.core.keys import job_key
    from tests.engine.support import run_until_finished

    expired, kept, retried = (tasks.add.enqueue(n, 1) for n in range(3))
    run_until_finished([expired.id, kept.id, retried.id])
    past = now_ms() - 1_000
    execute(
        alias,
        "UPDATE later_jobs_index SET date_expire = %s WHERE job_id IN (%s, %s)",
        [past, expired.id, retried.id],
    )
    execute(
        alias,
        f"UPDATE later_storage SET date_expire_unindexed = %s WHERE {key_column(alias)} = %s",
        [past, job_key(NAMESPACE, expired.id)],
    )
    # The record of ``retried`` was written live again (no expiry) after its index
    # row was read as expired: the sweep takes the index row and leaves the record.
    execute(
        alias,
        f"UPDATE later_storage SET date_expire_unindexed = NULL WHERE {key_column(alias)} = %s",
        [job_key(NAMESPACE, retried.id)],
    )

    assert sweep.sweep(context(alias)) == 2

    records = {
        key
        for (key,) in fetch(
            alias,
            f"SELECT {key_column(alias)} FROM later_storage WHERE {key_column(alias)} LIKE %s",
            ["%-job-%"],
        )
    }
    assert job_key(NAMESPACE, expired.id) not in records
    assert {job_key(NAMESPACE, kept.id), job_key(NAMESPACE, retried.id)} <= records
    index = {job_id for (job_id,) in fetch(alias, "SELECT job_id FROM later_jobs_index")}
    assert index == {kept.id}
    assert tasks.add.get_result(kept.id).status == TaskResultStatus.SUCCESSFUL


# --- promote ---


def test_promote_moves_due_jobs_into_the_queue(alias: str) -> None:
    soon = tasks.add.using(run_after=timezone.now() + timedelta(milliseconds=200))
    results = [soon.enqueue(n, 1) for n in range(3)]
    runner = make_runner(alias, "promote")
    assert runner.run_due(force=True) == []  # nothing due yet: no lease taken
    assert stores_for(alias).kv.get(pass_lease_key(NAMESPACE, "promote")) is None
    deadline = time.monotonic() + 30
    promoted = 0
    while promoted < 3:
        assert time.monotonic() < deadline, "the delayed jobs were not promoted"
        promoted += sum(run.done for run in runner.run_due(force=True))
        time.sleep(0.05)
    assert stores_for(alias).queue.depth(NAMESPACE) == 3
    assert {tasks.add.get_result(r.id).status for r in results} == {TaskResultStatus.READY}


# --- reconcile ---


def test_reconcile_repairs_drifted_stage_counts_and_queue_depth(alias: str) -> None:
    stores = stores_for(alias)
    stores.index.job_index_upsert(
        NAMESPACE,
        [index_row(f"d{n}", "delayed") for n in range(3)]
        + [index_row(f"r{n}", "running") for n in range(2)],
    )
    stores_for(alias).queue.publish(NAMESPACE, "default", [b"a", b"b", b"c", b"d"])
    expected = {"delayed": 3, "running": 2, "enqueued": 4}
    assert stores.index.job_index_stage_counts(NAMESPACE) == expected
    # Drift: counters that no longer match the rows.
    execute(alias, "UPDATE later_stage_counts SET count = count + 40")
    execute(
        alias,
        "INSERT INTO later_stage_counts (namespace, stage, shard, count) VALUES (%s, %s, 7, 9)",
        [NAMESPACE, "waiting"],
    )
    execute(alias, "UPDATE later_queue_depth SET ready = 999")
    assert stores.index.job_index_stage_counts(NAMESPACE) != expected
    runs = make_runner(alias, "reconcile").run_due()
    assert [(run.name, run.error) for run in runs] == [("reconcile", None)]
    assert stores.index.job_index_stage_counts(NAMESPACE) == expected
    assert (
        count(alias, "SELECT SUM(ready) FROM later_queue_depth WHERE namespace = %s", [NAMESPACE])
        == 4
    )


# --- queue samples ---


def test_queue_sampling_writes_one_row_per_minute_however_often_it_runs(alias: str) -> None:
    queue = stores_for(alias).queue
    queue.publish(NAMESPACE, "default", [b"a", b"b"])
    stores_for(alias).index.job_index_upsert(
        NAMESPACE, [index_row("p1", "enqueued", topic="orders", partition_id=0, sequence=1)]
    )
    # Many processes, many runs: forced past every process's own next-try time.
    runners = [make_runner(alias, "queue_sample", owner=f"P{n}") for n in range(3)]
    bucket = minute_bucket(now_ms())
    for _ in range(5):
        for runner in runners:
            runner.run_due(force=True)
        # A run by hand too (it replaces the minute's reading, never adds one).
        queue_sample.sample_queue(context(alias))
    rows = fetch(
        alias,
        "SELECT minute_bucket, queued, partitioned FROM later_queue_samples WHERE namespace = %s",
        [NAMESPACE],
    )
    if minute_bucket(now_ms()) == bucket:
        assert rows == [(bucket, 2, 1)]
    else:  # the minute turned during the test: one row per minute, never two
        assert sorted(row[0] for row in rows) == [bucket, bucket + 1]
        assert {row[1:] for row in rows} == {(2, 1)}


def test_queue_sampling_trims_rows_older_than_a_week(alias: str) -> None:
    bucket = minute_bucket(now_ms())
    week = 7 * 24 * 60
    for old in (bucket - week - 5, bucket - week + 5):
        execute(
            alias,
            "INSERT INTO later_queue_samples (namespace, minute_bucket, queued, partitioned)"
            " VALUES (%s, %s, 0, 0)",
            [NAMESPACE, old],
        )
    queue_sample.sample_queue(context(alias))
    buckets = [row[0] for row in fetch(alias, "SELECT minute_bucket FROM later_queue_samples")]
    assert bucket - week - 5 not in buckets
    assert bucket - week + 5 in buckets


# --- purge ---


def worker(worker_id: str, heartbeat_at_ms: int) -> WorkerRow:
    return WorkerRow(
        worker_id=worker_id,
        host="h",
        pid=1,
        concurrency=1,
        queues=["default"],
        busy=0,
        started_at_ms=heartbeat_at_ms,
        heartbeat_at_ms=heartbeat_at_ms,
    )


def test_purge_removes_only_dead_worker_rows_and_dead_leases(alias: str) -> None:
    stores = stores_for(alias)
    now = now_ms()
    long_ago = now - 2 * HOUR_MS
    stores.executions.worker_heartbeat(NAMESPACE, worker("live", now))
    stores.executions.worker_heartbeat(NAMESPACE, worker("quiet", now - 5 * MINUTE_MS))
    stores.executions.worker_heartbeat(NAMESPACE, worker("dead", long_ago))
    stores.index.job_index_upsert(
        NAMESPACE,
        [
            index_row("finished", "success", expire_ms=now + HOUR_MS),
            index_row("retried", "requeued"),
            index_row("stuck", "running"),
            index_row("recent", "failed", expire_ms=now + HOUR_MS),
            index_row("live", "running"),
        ],
    )
    # Lapsed long ago, job finished / retried / deleted: dead.
    stores.executions.lease_acquire_many(NAMESPACE, "w-dead", long_ago, [("finished", long_ago, 1)])
    stores.executions.lease_acquire_many(NAMESPACE, "w-dead", long_ago, [("retried", long_ago, 1)])
    stores.executions.lease_acquire_many(NAMESPACE, "w-dead", long_ago, [("deleted", long_ago, 1)])
    # Kept: lapsed long ago but the job is still marked running (its next start
    # names the lost worker from it); lapsed only recently; live.
    stores.executions.lease_acquire_many(NAMESPACE, "w-dead", long_ago, [("stuck", long_ago, 1)])
    stores.executions.lease_acquire_many(NAMESPACE, "w-old", now, [("recent", now - MINUTE_MS, 1)])
    stores.executions.lease_acquire_many(NAMESPACE, "w-live", now, [("live", now + 30_000, 1)])
    # Another namespace's dead rows are not this namespace's to purge.
    stores.executions.worker_heartbeat("other", worker("dead-elsewhere", long_ago))

    runs = make_runner(alias, "purge").run_due()
    assert [(run.name, run.done, run.error) for run in runs] == [("purge", 4, None)]

    workers = fetch(alias, "SELECT namespace, worker_id FROM later_worker ORDER BY worker_id")
    assert workers == [
        ("other", "dead-elsewhere"),
        (NAMESPACE, "live"),
        (NAMESPACE, "quiet"),
    ]
    leases = fetch(alias, "SELECT job_id FROM later_job_execution ORDER BY job_id")
    assert [job_id for (job_id,) in leases] == ["live", "recent", "stuck"]


def test_purge_works_in_small_batches_until_none_are_left(
    alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(purge, "PURGE_BATCH", 3)
    stores = stores_for(alias)
    long_ago = now_ms() - 2 * HOUR_MS
    for n in range(8):
        stores.executions.worker_heartbeat(NAMESPACE, worker(f"dead{n}", long_ago))
    assert purge.purge(context(alias, budget_seconds=-1)) == 3
    assert count(alias, "SELECT COUNT(*) FROM later_worker") == 5
    assert purge.purge(context(alias)) == 5
    assert count(alias, "SELECT COUNT(*) FROM later_worker") == 0


# --- vacuum ---


def test_vacuum_is_off_unless_vacuum_interval_is_set(alias: str) -> None:

    assert make_runner(alias, "vacuum").run_due() == []
    with override_settings(
        LATER={"NAMESPACE": NAMESPACE, "DATABASE": alias, "VACUUM_INTERVAL": 60}
    ):
        runs = make_runner(alias, "vacuum").run_due()

    if connections[alias].vendor == "sqlite":
        assert [(run.name, run.done, run.error) for run in runs] == [("vacuum", 1, None)]
    else:  # autovacuum's job (MySQL has no vacuum, decision 242): the pass takes no lease
        assert runs == []
