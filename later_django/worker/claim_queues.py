"""Which queues a worker's plain claim asks for: its own, less the paused ones and
the limited ones (``LATER["QUEUE_LIMITS"]``, claimed by :mod:`~later_django.worker.
limited_claims`).

The paused set (:mod:`later_django.engine.queue_pause`) is read again when it is
older than ``REFRESH_SECONDS`` at the moment the loop claims, so no claim uses
a set older than that: a pause is obeyed within that time on every host.

A worker of every queue (``--queue`` not given) claims with no queue condition
while nothing is paused. While something is, it claims from the queues the
namespace has messages in (the ``later_queue_depth`` rows, read with the paused
set) less the paused ones: a queue first used meanwhile is claimed from at the
next refresh. This keeps the claim itself the same statement whether queues
are paused or not. Limited queues are left out the same way, always.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from later_django.engine.queue_pause import REFRESH_SECONDS, paused_queue_names
from later_django.storage.stores import Stores

logger = logging.getLogger("later_django.worker")

#: Claim from nothing: every queue of the worker is paused.
NOTHING: tuple[str, ...] = ()


class ClaimQueues:
    """The claim's ``queue_names``: ``None`` (every queue), a tuple of names, or
    :data:`NOTHING`. Main thread only."""

    def __init__(
        self,
        stores: Stores,
        namespace: str,
        queues: Sequence[str] | None,
        *,
        refresh_seconds: float = REFRESH_SECONDS,
        limited: frozenset[str] = frozenset(),
    ) -> None:
        self.stores = stores
        self.namespace = namespace
        self.queues = None if queues is None else tuple(queues)
        self.refresh_seconds = refresh_seconds
        self.limited = limited
        self.paused: frozenset[str] = frozenset()
        self._names: tuple[str, ...] | None = self.queues
        self._read_at: float | None = None

    def current(self) -> tuple[str, ...] | None:
        """The names to claim from now; reads the paused set first when it is older
        than ``refresh_seconds`` (raises the database error of that read)."""
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= self.refresh_seconds:
            self._refresh()
            self._read_at = now
        return self._names

    def _refresh(self) -> None:
        paused = paused_queue_names(self.stores, self.namespace)
        if paused != self.paused:
            self._log_change(self.paused, paused)
            self.paused = paused
        skipped = paused | self.limited
        if not skipped:
            self._names = self.queues
        elif self.queues is not None:
            self._names = tuple(name for name in self.queues if name not in skipped)
        else:
            known = (name for name, _ in self.stores.dashboard.queue_depths(self.namespace))
            self._names = tuple(name for name in known if name not in skipped)

    def _log_change(self, before: frozenset[str], after: frozenset[str]) -> None:
        mine = (lambda name: True) if self.queues is None else self.queues.__contains__
        paused = sorted(name for name in after - before if mine(name))
        resumed = sorted(name for name in before - after if mine(name))
        if paused:
            logger.info("queue(s) %s paused: not claiming from them", ", ".join(paused))
        if resumed:
            logger.info("queue(s) %s resumed", ", ".join(resumed))
