"""Which partitions this worker holds: rendezvous preference, fenced leases.

About once a second (and at start) the worker reads the live workers (a
heartbeat within the lease window) and, for every partition of every
configured topic (the reserved recurring topic included), ranks the live
workers by a rendezvous hash of ``(worker, topic, partition)``; the highest
is the partition's preferred owner. The worker then releases the leases it
holds but no longer prefers and, in one statement, takes or renews those it
prefers (``take(renew_own=True)`` of the one fenced lease,
:mod:`later_django.storage.leases`: a lease is taken only when absent,
released, lapsed, or already its own; taking one over increments its epoch).
A partition whose head it is running is kept and renewed until that head is
finished. So a
newly started worker gets its share within a second or two, and a dead
worker's partitions move once its leases lapse.

Preference is only a hint: the lease row decides, and every write to a head
is fenced by owner and epoch (:mod:`later_django.engine.execution.heads`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from later_django.conf import LaterSettings
from later_django.core import rendezvous
from later_django.core.clock import now_ms
from later_django.engine.topics import configured_topics
from later_django.storage.partitions import Partition
from later_django.worker.options import WorkerContext

logger = logging.getLogger("later_django.worker")

#: How often the worker recomputes its preferred partitions and renews leases.
REFRESH_SECONDS = 1.0


def all_partitions(settings: LaterSettings) -> list[Partition]:
    return [
        (topic, partition_id)
        for topic, count in sorted(configured_topics(settings).items())
        for partition_id in range(count)
    ]


class PartitionAssignment:
    """The partitions (and lease epochs) one worker holds; refreshed by :meth:`maintain`.

    ``busy()`` returns the partitions whose head this worker is running: they
    are kept (and renewed) even when no longer preferred.
    """

    def __init__(self, *, context: WorkerContext, busy: Callable[[], set[Partition]]) -> None:
        self.namespace = context.namespace
        self.worker_id = context.worker_id
        self.lease_ms = context.lease_ms
        self.stores = context.stores
        self.busy = busy
        self.telemetry = context.telemetry
        #: partition -> epoch of the lease this worker holds
        self.held: dict[Partition, int] = {}
        self._last_refresh = 0.0
        self._partitions = all_partitions(context.settings)

    def maintain(self) -> bool:
        """Refreshes when :data:`REFRESH_SECONDS` passed; returns whether it did."""
        if time.monotonic() - self._last_refresh < REFRESH_SECONDS:
            return False
        self.refresh()
        return True

    def refresh(self) -> None:
        """Computes the preferred partitions over the live workers, releases the
        ones no longer wanted, takes or renews the rest."""
        self._last_refresh = time.monotonic()
        now = now_ms()
        live = [
            row.worker_id
            for row in self.stores.executions.workers_live(self.namespace, now - self.lease_ms)
        ]
        if self.worker_id not in live:
            live.append(self.worker_id)
        preferred = {
            partition
            for partition in self._partitions
            if rendezvous.owner(live, *partition) == self.worker_id
        }
        busy = self.busy()
        store = self.stores.partitions
        scope = (self.namespace,)
        unwanted = [p for p in self.held if p not in preferred and p not in busy]
        if unwanted:
            store.leases.release(scope, self.worker_id, unwanted)
        wanted = preferred | (busy & set(self.held))
        current = store.leases.leases(scope)
        # Only rows a take can win are written: an upsert would lock live leases of others.
        takeable = [
            partition
            for partition in wanted
            if partition not in current
            or current[partition].owner in (None, self.worker_id)
            or current[partition].until_ms < now
        ]
        held = store.leases.take(
            scope,
            self.worker_id,
            takeable,
            until_ms=now + self.lease_ms,
            now_ms=now,
            renew_own=True,
        )
        # A head lost to the one race of the head bookkeeping comes back here.
        store.materialize_heads(self.namespace, held)
        gained = set(held) - set(self.held)
        lost = set(self.held) - set(held) - set(unwanted)
        if lost:
            self.telemetry.lease_lost("partition", len(lost))
        if gained or lost or unwanted:
            logger.info(
                "partitions: %d held (%d taken, %d released, %d lost) among %d live worker(s)",
                len(held),
                len(gained),
                len(unwanted),
                len(lost),
                len(live),
            )
        self.held = held

    def release_all(self) -> None:
        """Gives up every lease this worker holds (a graceful exit)."""
        if self.held:
            self.stores.partitions.leases.release(
                (self.namespace,), self.worker_id, list(self.held)
            )
            self.held = {}
