"""The ``reconcile`` pass (every 300 s): the stage counters and queue depths recounted
where that reads little.

The counters are kept by triggers in the transaction that writes the rows, so they
do not drift by themselves; what can make them drift is done by hand (a ``TRUNCATE``
of one table, triggers switched off for a restore or a replica). A recount reads every
row of the namespace, so the pass recounts only a table whose namespace holds at most
``RECONCILE_MAX_ROWS`` rows (a small installation heals itself), and leaves a larger
one to ``manage.py later_maintenance --recount`` (decision 115).
"""

from __future__ import annotations

from later_django.maintenance.definition import MaintenancePass, PassContext

#: The most rows of a namespace (index rows; delivery rows) the pass recounts per table.
RECONCILE_MAX_ROWS = 5_000


def reconcile(context: PassContext) -> int:
    """Replaces the namespace's stage counters (finished stages too) and queue depths
    with recounts (one transaction), each only when its table holds at most
    ``RECONCILE_MAX_ROWS`` rows of the namespace; returns how many of the two it
    recounted."""
    return context.stores.index.job_index_reconcile_stage_counts(
        context.namespace, max_rows=RECONCILE_MAX_ROWS
    )


RECONCILE = MaintenancePass(
    "reconcile",
    300.0,
    reconcile,
    max_run_seconds=10.0,
    unit=("counter table recounted", "counter tables recounted"),
)
