"""The ``reconcile`` pass (every 300 s): the stage counters and queue depths recounted."""

from __future__ import annotations

from later_django.maintenance.definition import MaintenancePass, PassContext


def reconcile(context: PassContext) -> int:
    """Replaces the namespace's stage counters (finished stages too) and queue depths
    with recounts (one transaction); returns 1."""
    context.stores.index.job_index_reconcile_stage_counts(context.namespace)
    return 1


RECONCILE = MaintenancePass(
    "reconcile",
    300.0,
    reconcile,
    max_run_seconds=10.0,
    unit=("namespace recounted", "namespaces recounted"),
)
