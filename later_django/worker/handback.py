"""Claimed work given back before its lease would lapse.

Two cases: messages claimed whose start failed (:meth:`HandBack.unstarted`),
made ready again at once or, when the database does not answer, as soon as it
does (:meth:`HandBack.flush`, called by every loop), well before their leases
would lapse; and, at the shutdown timeout, the messages of jobs still running
(:meth:`HandBack.still_running`), whose execution leases are lapsed at the same
time so the next worker records the interrupted attempt; and, at a second stop
signal, the jobs still running (:meth:`HandBack.lost`), whose attempts are
recorded lost (``WorkerLost``) at once, so the retry policy runs them again
without waiting for their leases. Only messages and leases this worker still
holds change; if the process dies first they wait for the lease.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db import Error as DatabaseError

from later_django.core.clock import now_ms
from later_django.engine.execution.lost import record_lost_attempts
from later_django.engine.execution.values import StartedJob
from later_django.worker.options import WorkerContext

logger = logging.getLogger("later_django.worker")


class HandBack:
    """Sequences of claimed, unstarted messages not yet handed back (``pending``)."""

    def __init__(self, context: WorkerContext) -> None:
        self.context = context
        self.pending: list[int] = []

    def unstarted(self, sequences: Sequence[int]) -> None:
        """Hands back ``sequences`` now; keeps them for :meth:`flush` when the
        database does not answer (logged, not raised)."""
        self.pending.extend(sequences)
        try:
            self.flush()
        except DatabaseError:
            logger.warning(
                "could not hand back %d message(s) yet; retrying when the database answers",
                len(self.pending),
            )

    def flush(self) -> None:
        """Hands back :attr:`pending`; raises the database error and keeps them when
        it fails."""
        if not self.pending:
            return
        handed = self.context.stores.queue.nack(self.context.worker_id, self.pending)
        logger.info("handed back %d unstarted message(s)", handed)
        self.pending = []

    def still_running(self, sequences: Sequence[int], job_ids: Sequence[str]) -> None:
        """At the shutdown timeout: the messages of jobs still running become ready
        and their execution leases lapse now; a database error is logged (the leases
        then lapse by themselves)."""
        context = self.context
        logger.warning("shutdown timeout: handing back %d job(s) still running", len(sequences))
        try:
            context.stores.queue.nack(context.worker_id, sequences)
            # Lapsed now rather than deleted: the next worker records the
            # interrupted attempt under this worker's name.
            context.stores.executions.lease_renew(
                context.namespace, context.worker_id, job_ids, now_ms()
            )
        except DatabaseError:
            logger.warning("could not hand back; their leases will lapse", exc_info=True)

    def lost(self, started: Sequence[StartedJob]) -> None:
        """At a second stop signal: the attempts of ``started`` fail now as
        ``WorkerLost`` (retried or failed by the retry policy), one transaction, one
        attempt; raises the database error (the leases then lapse by themselves)."""
        context = self.context
        records = record_lost_attempts(
            started,
            stores=context.stores,
            namespace=context.namespace,
            worker_id=context.worker_id,
            settings=context.settings,
            why=f"worker {context.worker_id} was stopped by a second signal while running it",
        )
        logger.warning("handed back %d running job(s) as lost (WorkerLost)", len(records))

    def leave(self) -> None:
        """Removes this worker's row: the others stop counting it live at once, so
        its share of the partitions goes to them now, not when its heartbeat ages."""
        self.context.stores.executions.worker_remove(self.context.namespace, self.context.worker_id)
