"""The ``promote`` pass (every 0.5 s): due delayed and requeued jobs into the queue."""

from __future__ import annotations

from later_django.core.clock import now_ms
from later_django.core.keys import due_scan_bounds
from later_django.engine.promotion import promote_due
from later_django.maintenance.definition import MaintenancePass, PassContext

#: Jobs moved per transaction.
PROMOTE_BATCH = 500


def due_jobs_exist(context: PassContext) -> bool:
    """A read of one key: is any delayed or requeued job due now?"""
    start, stop = due_scan_bounds(context.namespace, now_ms())
    return bool(context.stores.kv.key_scan(start, stop, 1))


def promote(context: PassContext) -> int:
    """Moves due jobs to ``enqueued``, ``PROMOTE_BATCH`` per transaction, until a
    batch comes back short or the budget is spent; returns how many."""
    total = 0
    while True:
        promoted = promote_due(
            stores=context.stores, namespace=context.namespace, limit=PROMOTE_BATCH
        )
        total += promoted
        if promoted < PROMOTE_BATCH or context.out_of_time():
            return total


PROMOTE = MaintenancePass(
    "promote",
    0.5,
    promote,
    max_run_seconds=5.0,
    wanted=due_jobs_exist,
    unit=("job promoted", "jobs promoted"),
)
