"""The claims of a worker's limited queues (``LATER["QUEUE_LIMITS"]``).

A limited queue is left out of the plain claim (:class:`~later_django.worker.
claim_queues.ClaimQueues`) and claimed here, one queue at a time, through
:func:`~later_django.engine.queue_limits.claim_limited`: the claim itself obeys the
limits across every worker and host. The slots the claim hands out are kept here by
job id; the heartbeat renews them with the job's other leases, a finished job's
slot is given back after its outcome is written, and a slot whose job did not start
(a stale message) at once. At exit every slot is given back; a dead worker's lapse
with their lease. With no limits configured nothing here runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from later_django.core.clock import now_ms
from later_django.engine.cancellation import Requests
from later_django.engine.execution.start import start_batch
from later_django.engine.execution.values import Outcome
from later_django.engine.queue_limits import claim_limited, release_slots, renew_slots
from later_django.worker.handback import HandBack
from later_django.worker.jobs import RunningJobs
from later_django.worker.options import WorkerContext

logger = logging.getLogger("later_django.worker")


class LimitedClaims:
    """Claims from the limited queues this worker takes; holds their slots."""

    def __init__(self, context: WorkerContext, jobs: RunningJobs, hand_back: HandBack) -> None:
        self.context = context
        self.jobs = jobs
        self.hand_back = hand_back
        limits = context.settings.queue_limits
        mine = context.options.queues
        #: The limited queues this worker claims from (all of them for an any-queue worker).
        self.queues = sorted(name for name in limits if mine is None or name in mine)
        self._lock = threading.Lock()
        #: job id -> (slot key, epoch) of the running jobs of concurrency-limited queues.
        self._slots: dict[str, tuple[str, int]] = {}

    def claim(self, paused: frozenset[str], cancels: Requests) -> int:
        """Claims and starts jobs of each limited queue not ``paused``, within the free
        threads; returns how many messages it claimed. A failed start hands the
        messages back (and their slots) and raises."""
        claimed = 0
        context = self.context
        for queue_name in self.queues:
            free = self.jobs.free_slots()
            if free <= 0:
                break
            if queue_name in paused or not context.stores.queue.has_ready(
                context.namespace, [queue_name]
            ):
                continue
            claim = claim_limited(
                context.stores,
                context.namespace,
                context.worker_id,
                queue_name,
                context.settings.queue_limits[queue_name],
                free,
                context.lease_ms,
            )
            if not claim.messages:
                continue
            self.jobs.claimed(len(claim.messages))
            claimed += len(claim.messages)
            try:
                started = start_batch(
                    claim.messages,
                    stores=context.stores,
                    namespace=context.namespace,
                    worker_id=context.worker_id,
                    lease_ms=context.lease_ms,
                    settings=context.settings,
                    cancels=cancels,
                )
            except BaseException:
                self.hand_back.unstarted([message.sequence for message in claim.messages])
                self._give_back([key for key, _ in claim.slots])
                raise
            by_sequence = {job.sequence: job for job in started}
            unused: list[str] = []
            with self._lock:
                for message, slot in zip(claim.messages, claim.slots, strict=False):
                    job = by_sequence.get(message.sequence)
                    if job is None:
                        unused.append(slot[0])
                    else:
                        self._slots[job.record.job_id] = slot
            self._give_back(unused)
            self.jobs.launch(started)
        return claimed

    def finished(self, outcomes: Sequence[Outcome]) -> None:
        """Gives back the slots of jobs whose outcome is written (one statement)."""
        if not self._slots:
            return
        with self._lock:
            ids = [
                o.started.record.job_id for o in outcomes if o.started.record.job_id in self._slots
            ]
            keys = [self._slots[job_id][0] for job_id in ids]
        self._give_back(keys)
        with self._lock:
            for job_id in ids:
                self._slots.pop(job_id, None)

    def renew(self) -> None:
        """Extends the slots held (the heartbeat thread, with the job leases); a slot
        lost meanwhile (this process stalled past its lease) is logged."""
        with self._lock:
            held = dict(self._slots.values())
        if not held:
            return
        kept = renew_slots(
            self.context.stores,
            self.context.worker_id,
            held,
            until_ms=now_ms() + self.context.lease_ms,
        )
        lost = set(held) - kept
        if lost:
            self.context.telemetry.lease_lost("queue_slot", len(lost))
            logger.warning(
                "lost %d queue slot(s) (the lease lapsed); the queue may briefly run more "
                "jobs than its concurrency limit",
                len(lost),
            )

    def release_all(self) -> None:
        with self._lock:
            keys = [key for key, _ in self._slots.values()]
            self._slots.clear()
        self._give_back(keys)

    def _give_back(self, keys: list[str]) -> None:
        if keys:
            release_slots(self.context.stores, self.context.worker_id, keys)
