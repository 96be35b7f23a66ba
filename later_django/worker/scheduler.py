"""When the main thread's periodic work runs: maintenance passes and the metrics flush.

Every loop calls :meth:`Scheduler.tick`: it runs the maintenance passes that
are due (``later_django.maintenance``: each pass keeps its own interval,
promotion every 0.5 s among them, and runs in one process per namespace at a
time), rings ``wake`` when the promote pass made jobs ready, and flushes the
metrics folded in memory about once every METRICS_FLUSH_SECONDS. A burst
worker does not wait for the promote pass: :meth:`Scheduler.promote_due_now`
promotes every due job at once. :meth:`Scheduler.flush_metrics` is the final
flush at exit.
"""

from __future__ import annotations

from later_django.core.clock import now_ms
from later_django.core.keys import due_scan_bounds
from later_django.engine import metrics
from later_django.engine.promotion import promote_all_due
from later_django.maintenance.framework import PassRunner
from later_django.worker.bell import Bell
from later_django.worker.options import WorkerContext

METRICS_FLUSH_SECONDS = 1.0
#: The maintenance pass that makes scheduled jobs ready.
PROMOTE_PASS = "promote"


class Scheduler:
    """Runs this process's share of the periodic work; cheap to call often."""

    def __init__(self, context: WorkerContext, wake: Bell) -> None:
        self.context = context
        self._wake = wake
        self._passes = PassRunner(
            using=context.using,
            namespace=context.namespace,
            settings=context.settings,
            owner=context.worker_id,
        )

    def tick(self) -> None:
        """The due maintenance passes, then the metrics flush when it is due. A
        database error while taking a pass's lease propagates (the loop backs off)."""
        runs = self._passes.run_due()
        if any(run.done for run in runs if run.name == PROMOTE_PASS):
            self._wake.set()
        if metrics.accumulator.seconds_since_flush() >= METRICS_FLUSH_SECONDS:
            metrics.flush()

    def promote_due_now(self) -> bool:
        """Promotes every job due now, whichever process runs the promote pass;
        returns whether any was due."""
        context = self.context
        start, stop = due_scan_bounds(context.namespace, now_ms())
        if not context.stores.kv.key_scan(start, stop, 1):
            return False
        promote_all_due(stores=context.stores, namespace=context.namespace)
        return True

    def flush_metrics(self) -> None:
        metrics.flush()
