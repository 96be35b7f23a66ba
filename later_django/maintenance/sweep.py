"""The ``sweep`` pass (every 10 s): expired values, range members, index rows and
stale metric buckets (the attempts per task among them)."""

from __future__ import annotations

from later_django.core.clock import now_ms
from later_django.maintenance.definition import MaintenancePass, PassContext

#: Rows deleted per statement.
SWEEP_BATCH = 1_000


def sweep(context: PassContext) -> int:
    """Deletes expired rows in batches of ``SWEEP_BATCH``: ``later_storage`` and
    ``later_storage_range`` (the whole database), then the namespace's
    ``later_jobs_index`` rows and metric buckets, and its ``later_task_minute`` rows
    older than the metric retention; stops when all come back short or the budget is
    spent. Returns the rows removed."""
    stores = context.stores
    total = 0
    values_left = index_left = attempts_left = True
    while values_left or index_left or attempts_left:
        if values_left:
            removed = stores.upkeep.sweep_expired(SWEEP_BATCH)
            total += removed
            values_left = removed >= SWEEP_BATCH
        if index_left:
            removed = stores.index.job_index_sweep_expired(context.namespace, now_ms(), SWEEP_BATCH)
            total += removed
            index_left = removed >= SWEEP_BATCH
        if attempts_left:
            removed = stores.metrics.sweep_task_minutes(context.namespace, now_ms(), SWEEP_BATCH)
            total += removed
            attempts_left = removed >= SWEEP_BATCH
        if context.out_of_time():
            break
    return total


SWEEP = MaintenancePass(
    "sweep", 10.0, sweep, max_run_seconds=2.0, unit=("row deleted", "rows deleted")
)
