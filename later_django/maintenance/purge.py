"""The ``purge`` pass (every 60 s): rows nothing reads any more, namely earlier
dashboards' ranges, dead workers and dead execution leases."""

from __future__ import annotations

from collections.abc import Callable

from later_django.core.clock import MINUTE_MS, now_ms
from later_django.maintenance.definition import MaintenancePass, PassContext

#: Rows deleted per statement.
PURGE_BATCH = 500
#: A worker row whose heartbeat is older than this is dead (workers beat every ~10 s).
DEAD_WORKER_AFTER_MS = 60 * MINUTE_MS
#: An execution lease that lapsed longer ago than this, of a job not running, is dead.
DEAD_LEASE_AFTER_MS = 60 * MINUTE_MS


def purge(context: PassContext) -> int:
    """Deletes rows nothing reads any more, ``PURGE_BATCH`` per statement, until none
    are left or the budget is spent: earlier dashboards' ranges and index rows of
    queued jobs not on a partition (``purge_unused_dashboard_rows``), worker rows
    silent for ``DEAD_WORKER_AFTER_MS``, and execution leases that lapsed
    ``DEAD_LEASE_AFTER_MS`` ago of jobs that are not running. Each kind gets one
    batch even when the budget is spent. Returns how many."""
    stores, namespace = context.stores, context.namespace
    steps: list[Callable[[], int]] = [
        lambda: stores.index.purge_unused_dashboard_rows(namespace, PURGE_BATCH),
        lambda: stores.executions.worker_purge_dead(
            namespace, now_ms() - DEAD_WORKER_AFTER_MS, PURGE_BATCH
        ),
        lambda: stores.executions.lease_purge_dead(
            namespace, now_ms() - DEAD_LEASE_AFTER_MS, PURGE_BATCH
        ),
    ]
    total = 0
    for step in steps:  # each kind gets at least one batch per run
        while True:
            removed = step()
            total += removed
            if removed < PURGE_BATCH or context.out_of_time():
                break
    return total


PURGE = MaintenancePass(
    "purge", 60.0, purge, max_run_seconds=2.0, unit=("row deleted", "rows deleted")
)
