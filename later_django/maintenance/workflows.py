"""The ``workflows`` pass (every 5 s): workflows whose jobs have all finished are
settled (counted by state, their expiry set), and those past their expiry are
forgotten (``engine.workflow_rest``)."""

from __future__ import annotations

from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.engine import workflow_rest
from later_django.maintenance.definition import MaintenancePass, PassContext

#: Live workflows looked at per round (one counts read each).
SETTLE_BATCH = 200
#: Workflows forgotten per transaction.
FORGET_BATCH = 100


def keep_ms(context: PassContext) -> int:
    """How long a workflow at rest is kept: the longest retention of a finished job,
    so its page outlives none of its jobs."""
    retention = context.settings.retention_seconds
    return max(retention[stage] for stage in stages.FINISHED_STAGES) * 1000


def run(context: PassContext) -> int:
    """One round: settle the oldest live workflows that came to rest, then forget
    expired ones until a batch comes back short or the budget is spent."""
    stores, namespace = context.stores, context.namespace
    done = workflow_rest.settle(stores, namespace, now_ms(), keep_ms(context), SETTLE_BATCH)
    while not context.out_of_time():
        forgotten = workflow_rest.forget(stores, namespace, now_ms(), FORGET_BATCH)
        done += forgotten
        if forgotten < FORGET_BATCH:
            break
    return done


WORKFLOWS = MaintenancePass(
    "workflows",
    5.0,
    run,
    max_run_seconds=10.0,
    unit=("workflow settled or forgotten", "workflows settled or forgotten"),
)
