"""later_django's built-in maintenance passes, registered at import.

* ``promote`` (0.5 s): due delayed/requeued jobs into the queue.
* ``recurring`` (1 s): due occurrences of recurring jobs (``later_django.engine.recurring_pass``).
* ``sweep`` (10 s): expired values, range members, index rows, stale metric buckets.
* ``wal_checkpoint`` (5 s, SQLite): truncate a write-ahead log over 32,768 frames.
* ``vacuum`` (``VACUUM_INTERVAL``, off by default): SQLite ``VACUUM``.
* ``reconcile`` (300 s): recount the stage counters (finished stages too) and queue depth.
* ``queue_sample`` (once a minute): one ``later_queue_samples`` row per namespace and minute.
* ``purge`` (60 s): rows nothing reads: old dashboard ranges, dead workers, dead leases.

Every run is bounded: batches of ``*_BATCH`` rows, looped until a batch
comes back short or the pass's time budget is spent (the rest waits for the
next run).
"""

from __future__ import annotations

import logging

from django.db import connections

from later_django.core.clock import MINUTE_MS, minute_bucket, now_ms
from later_django.core.keys import due_scan_bounds
from later_django.engine.promotion import promote_due
from later_django.engine.recurring_pass import recurring_pass, recurring_wanted
from later_django.maintenance.framework import MaintenancePass, PassContext, register_pass
from later_django.storage.django import DjangoStorage
from later_django.storage.stores import stores_for
from later_django.storage.types import WalCheckpoint
from later_django.storage.upkeep import (
    WAL_CHECK_INTERVAL_MS,
    WAL_CHECKPOINT_FRAMES,
    WAL_RETRY_AFTER_BUSY_MS,
    WAL_TRUNCATE_WAIT_MS,
)

logger = logging.getLogger("later_django.maintenance")

PROMOTE_BATCH = 500
SWEEP_BATCH = 1_000
PURGE_BATCH = 500
#: A worker row whose heartbeat is older than this is dead (workers beat every ~10 s).
DEAD_WORKER_AFTER_MS = 60 * MINUTE_MS
#: An execution lease that lapsed longer ago than this, of a job not running, is dead.
DEAD_LEASE_AFTER_MS = 60 * MINUTE_MS


# --- promote ---


def due_jobs_exist(context: PassContext) -> bool:
    """A read of one key: is any delayed or requeued job due now?"""
    start, stop = due_scan_bounds(context.namespace, now_ms())
    return bool(DjangoStorage(context.using).key_scan(start, stop, 1))


def promote(context: PassContext) -> int:
    """Moves due jobs to ``enqueued``, ``PROMOTE_BATCH`` per transaction, until a
    batch comes back short or the budget is spent; returns how many."""
    total = 0
    while True:
        promoted = promote_due(
            stores=stores_for(context.using), namespace=context.namespace, limit=PROMOTE_BATCH
        )
        total += promoted
        if promoted < PROMOTE_BATCH or context.out_of_time():
            return total


# --- sweep ---


def sweep(context: PassContext) -> int:
    """Deletes expired rows in batches of ``SWEEP_BATCH``: ``later_storage`` and
    ``later_storage_range`` (the whole database), then the namespace's
    ``later_jobs_index`` rows and metric buckets; stops when both come back short
    or the budget is spent. Returns the rows removed."""
    storage = DjangoStorage(context.using)
    total = 0
    values_left = index_left = True
    while values_left or index_left:
        if values_left:
            removed = storage.sweep_expired(SWEEP_BATCH)
            total += removed
            values_left = removed >= SWEEP_BATCH
        if index_left:
            removed = storage.job_index_sweep_expired(context.namespace, now_ms(), SWEEP_BATCH)
            total += removed
            index_left = removed >= SWEEP_BATCH
        if context.out_of_time():
            break
    return total


# --- SQLite write-ahead log ---


def is_sqlite(context: PassContext) -> bool:
    return connections[context.using].vendor == "sqlite"


def checkpoint_wal(context: PassContext) -> int:
    """SQLite: a passive checkpoint, then a truncating one (waiting at most
    ``WAL_TRUNCATE_WAIT_MS`` for readers) when the log holds ``WAL_CHECKPOINT_FRAMES``
    frames or more. After giving up, no process tries again for
    ``WAL_RETRY_AFTER_BUSY_MS``. Returns 1 when the log was truncated, else 0.
    Does nothing on PostgreSQL (the pass is not even leased there)."""
    if not is_sqlite(context):
        return 0
    outcome = stores_for(context.using).upkeep.checkpoint_wal_above(
        WAL_CHECKPOINT_FRAMES, WAL_TRUNCATE_WAIT_MS
    )
    if outcome is WalCheckpoint.TRUNCATED:
        logger.info("truncated the SQLite write-ahead log of database %r", context.using)
        return 1
    if outcome is WalCheckpoint.GAVE_UP:
        logger.info(
            "a reader kept the write-ahead log of database %r from truncating; retrying in %d ms",
            context.using,
            WAL_RETRY_AFTER_BUSY_MS,
        )
        context.defer(WAL_RETRY_AFTER_BUSY_MS / 1000)
    return 0


# --- vacuum ---


def vacuum_interval(settings) -> float | None:  # type: ignore[no-untyped-def]
    return settings.vacuum_interval_seconds


def vacuum(context: PassContext) -> int:
    """SQLite ``VACUUM`` (rebuilds the file under an exclusive lock); PostgreSQL leaves
    it to autovacuum. Returns 1 when it vacuumed."""
    if not is_sqlite(context):
        return 0
    stores_for(context.using).upkeep.vacuum()
    return 1


# --- reconcile ---


def reconcile(context: PassContext) -> int:
    """Replaces the namespace's stage counters (finished stages too) and queue depths
    with recounts (one transaction); returns 1."""
    DjangoStorage(context.using).job_index_reconcile_stage_counts(context.namespace)
    return 1


# --- queue samples ---


def minute_not_sampled(context: PassContext) -> bool:
    """A read: has the current minute no queue sample yet?"""
    now = now_ms()
    samples = DjangoStorage(context.using).queue_samples_since(context.namespace, now)
    return not any(sample.at_ms == minute_bucket(now) * MINUTE_MS for sample in samples)


def sample_queue(context: PassContext) -> int:
    """Records this minute's ``(queued, partitioned)`` reading (replacing one of the same
    minute) and trims readings older than a week; returns 1."""
    storage = DjangoStorage(context.using)
    queued, partitioned = storage.queue_sample_counts(context.namespace)
    storage.queue_sample_record(context.namespace, now_ms(), queued, partitioned)
    return 1


# --- purge ---


def purge(context: PassContext) -> int:
    """Deletes rows nothing reads any more, ``PURGE_BATCH`` per statement, until none
    are left or the budget is spent: earlier dashboards' ranges and index rows of
    queued jobs not on a partition (``purge_unused_dashboard_rows``), worker rows
    silent for ``DEAD_WORKER_AFTER_MS``, and execution leases that lapsed
    ``DEAD_LEASE_AFTER_MS`` ago of jobs that are not running. Each kind gets one
    batch even when the budget is spent. Returns how many."""
    storage = DjangoStorage(context.using)
    namespace = context.namespace
    total = 0
    steps = [
        lambda: storage.purge_unused_dashboard_rows(namespace, PURGE_BATCH),
        lambda: storage.worker_purge_dead(namespace, now_ms() - DEAD_WORKER_AFTER_MS, PURGE_BATCH),
        lambda: storage.lease_purge_dead(namespace, now_ms() - DEAD_LEASE_AFTER_MS, PURGE_BATCH),
    ]
    for step in steps:  # each kind gets at least one batch per run
        while True:
            removed = step()
            total += removed
            if removed < PURGE_BATCH or context.out_of_time():
                break
    return total


PROMOTE = register_pass(
    MaintenancePass("promote", 0.5, promote, max_run_seconds=5.0, wanted=due_jobs_exist)
)
# Recurring jobs (later_django.engine.recurring_pass): due occurrences, one transaction per page.
RECURRING = register_pass(
    MaintenancePass("recurring", 1.0, recurring_pass, max_run_seconds=5.0, wanted=recurring_wanted)
)
SWEEP = register_pass(MaintenancePass("sweep", 10.0, sweep, max_run_seconds=2.0))
WAL_CHECKPOINT = register_pass(
    MaintenancePass(
        "wal_checkpoint",
        WAL_CHECK_INTERVAL_MS / 1000,
        checkpoint_wal,
        # The truncating checkpoint may wait this long for readers.
        max_run_seconds=WAL_TRUNCATE_WAIT_MS / 1000 + 5.0,
        wanted=is_sqlite,
    )
)
VACUUM = register_pass(
    MaintenancePass(
        "vacuum",
        86_400.0,
        vacuum,
        # VACUUM cannot be interrupted: the lease must outlast a big file's rebuild.
        max_run_seconds=3_600.0,
        interval_from_settings=vacuum_interval,
        wanted=is_sqlite,
    )
)
RECONCILE = register_pass(MaintenancePass("reconcile", 300.0, reconcile, max_run_seconds=10.0))
QUEUE_SAMPLE = register_pass(
    MaintenancePass(
        "queue_sample", 10.0, sample_queue, max_run_seconds=5.0, wanted=minute_not_sampled
    )
)
PURGE = register_pass(MaintenancePass("purge", 60.0, purge, max_run_seconds=2.0))
