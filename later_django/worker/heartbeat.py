"""The worker's heartbeat thread: lease renewal and the ``later_worker`` row.

Every third of the lease it extends, on its own connection, the delivery
leases and execution leases of every job the process holds, and refreshes the
process's row in ``later_worker`` (busy count, busy per queue, heartbeat time). A process that
stops beating (killed, frozen) loses its leases when they lapse, and its jobs
are delivered again. The thread owns that row: :meth:`Heartbeat.retire` ends
it and then removes the row, so no beat still in flight can write it back.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from django.db import close_old_connections, connections

from later_django.core.clock import now_ms
from later_django.storage.stores import Stores
from later_django.storage.types import WorkerRow
from later_django.worker.telemetry import NO_TELEMETRY, Telemetry

logger = logging.getLogger("later_django.worker")


class Heartbeat(threading.Thread):
    """Beats every third of ``lease_ms`` until ``stop`` is set; ``held()`` and
    ``finishing()`` are the process's :class:`~later_django.worker.jobs.RunningJobs`."""

    def __init__(
        self,
        *,
        stores: Stores,
        namespace: str,
        worker: WorkerRow,
        lease_ms: int,
        held: Callable[[], tuple[list[int], list[str]]],
        finishing: Callable[[], set[int]],
        stop: threading.Event,
        renew_also: Callable[[], None] | None = None,
        busy_queues: Callable[[], dict[str, int]] | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        super().__init__(name="later-heartbeat", daemon=True)
        self.stores = stores
        self.namespace = namespace
        self.worker = worker
        self.lease_ms = lease_ms
        self.held = held
        self.finishing = finishing
        self.stop = stop
        #: Further leases renewed at each beat (the limited queues' slots).
        self.renew_also = renew_also
        #: Running jobs per queue, written with ``busy`` (the metrics view's figure).
        self.busy_queues = busy_queues
        self.telemetry = telemetry

    def beat(self) -> None:
        """One renewal of everything held, and the worker row."""
        sequences, job_ids = self.held()
        now = now_ms()
        executions = self.stores.executions
        if sequences:
            kept = set(self.stores.queue.renew(self.worker.worker_id, sequences, self.lease_ms))
            # A message being acknowledged meanwhile is not lost: only those the
            # process still holds, and is not finishing, count.
            still_held, finishing = set(self.held()[0]), self.finishing()
            lost = [
                sequence
                for sequence in sequences
                if sequence not in kept and sequence in still_held and sequence not in finishing
            ]
            if lost:
                self.telemetry.lease_lost("delivery", len(lost))
                logger.warning(
                    "lost the delivery lease of %d message(s); they may run again elsewhere",
                    len(lost),
                )
        if job_ids:
            executions.lease_renew(
                self.namespace, self.worker.worker_id, job_ids, now + self.lease_ms
            )
        if self.renew_also is not None:
            self.renew_also()
        busy_queues = {} if self.busy_queues is None else self.busy_queues()
        self.worker = WorkerRow(
            **{
                **self.worker.__dict__,
                "busy": len(job_ids),
                "busy_queues": busy_queues,
                "heartbeat_at_ms": now,
            }
        )
        executions.worker_heartbeat(self.namespace, self.worker)

    def retire(self, timeout: float) -> None:
        """Sets ``stop``, waits up to ``timeout`` seconds for a beat in flight to
        end, then deletes the worker row (a graceful exit: the others stop counting
        this worker live at once). The row is deleted after the last beat, never
        before it; raises the database error of the delete. If the thread is still
        beating after ``timeout`` the row is deleted anyway, and a late beat that
        writes it back leaves a row the dead-worker purge removes by its age."""
        self.stop.set()
        if self.is_alive():
            self.join(timeout)
            if self.is_alive():
                logger.warning("heartbeat still running after %.0fs; removing the row", timeout)
        self.stores.executions.worker_remove(self.namespace, self.worker.worker_id)

    def run(self) -> None:
        interval = self.lease_ms / 3000
        try:
            while not self.stop.wait(interval):
                try:
                    self.beat()
                except Exception:
                    logger.warning("heartbeat failed; retrying", exc_info=True)
                    close_old_connections()
                    with contextlib.suppress(Exception):
                        connections[self.stores.using].close()
        finally:
            connections.close_all()
