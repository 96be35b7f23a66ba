"""The partition-head claim path: start runnable heads of the partitions held here.

Which partitions this worker holds is :class:`~later_django.worker.partitions.
PartitionAssignment`'s job (refreshed about once a second from here). At most
one job per partition runs at a time: heads already running here are left out
of the claim. While jobs run, the next head of a finished partition starts in
the finish's own transaction (:mod:`later_django.worker.loop`), so heads are
only looked for when something may have become runnable otherwise: when marked
*dirty*, whenever nothing runs, and at least every HEAD_LOOK_SECONDS.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from later_django.core.clock import now_ms
from later_django.engine.cancellation import NONE, Requests
from later_django.engine.execution.heads import start_heads
from later_django.engine.execution.values import Outcome, StartedJob
from later_django.worker.jobs import RunningJobs
from later_django.worker.options import WorkerContext
from later_django.worker.partitions import PartitionAssignment

#: The most heads one claim takes (as for queue messages).
CLAIM_BATCH = 16
#: While the delivery queue keeps the worker busy, partition heads are still
#: looked at least this often.
HEAD_LOOK_SECONDS = 0.25


class HeadClaims:
    """Claims and starts partition heads; owns the partition assignment."""

    def __init__(self, context: WorkerContext, jobs: RunningJobs) -> None:
        self.context = context
        self.jobs = jobs
        self.partitions = PartitionAssignment(context=context, busy=jobs.busy_partitions)
        self._dirty = True
        self._last_look = 0.0

    def claim(self, cancels: Requests = NONE) -> int:
        """Maintains the assignment, then claims and starts the runnable heads of
        held partitions (as many as free slots allow; those in ``cancels`` are
        cancelled instead); returns how many it claimed. Heads claimed but not
        started (a lost attempt now retried) mark it dirty."""
        self.partitions.maintain()
        if not self.partitions.held:
            return 0
        free = self.jobs.free_slots()
        if free <= 0:
            return 0
        now = time.monotonic()
        # Busy: the next heads of finished partitions start with the finish, so only a
        # partition newly runnable (enqueue into an empty one, a head now due) is
        # looked for, every HEAD_LOOK_SECONDS. Idle: at every wake-up.
        idle = not self.jobs.any_running()
        if not (idle or self._dirty or now - self._last_look >= HEAD_LOOK_SECONDS):
            return 0
        self._dirty = False
        self._last_look = now
        context = self.context
        claims = context.stores.partitions.claim_heads(
            context.namespace,
            context.worker_id,
            now_ms(),
            self.jobs.running_job_ids(),
            min(CLAIM_BATCH, free),
        )
        if not claims:
            return 0
        started = start_heads(
            claims,
            stores=context.stores,
            namespace=context.namespace,
            worker_id=context.worker_id,
            lease_ms=context.lease_ms,
            settings=context.settings,
            cancels=cancels,
        )
        self.jobs.claimed(len(started))
        self.jobs.launch(started)
        self._dirty = len(started) < len(claims)
        return len(claims)

    def after_finish(
        self, outcomes: Sequence[Outcome], started: Sequence[StartedJob], slots: int
    ) -> None:
        """A finish that ended partition jobs and started as many next heads as it
        had slots for: other heads may wait, so the next claim looks."""
        if any(outcome.started.partition is not None for outcome in outcomes) and (
            len(started) >= slots
        ):
            self._dirty = True

    def look_again(self) -> None:
        """A head may have become runnable (a cancel freed a partition): the next
        claim looks."""
        self._dirty = True

    def refresh(self) -> None:
        """Takes this worker's share of the partitions now (at start)."""
        self.partitions.refresh()

    def release_all(self) -> None:
        self.partitions.release_all()
