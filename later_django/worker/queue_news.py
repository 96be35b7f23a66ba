"""Whether the delivery queue may hold ready work the last claim did not see.

A claim that comes back with fewer messages than it asked for saw every ready
message of its queues at that moment. Where the database notifies (PostgreSQL),
every transaction that publishes messages for the namespace wakes the listener,
so until the listener hears something new, another claim of the same queues
would come back empty: one round trip, and on a busy host the CPU the web
processes need for their enqueues. Without this the loop claimed again after
each start and after each finish, two empty claims per job when jobs come one
at a time.

What a notification does not announce is caught by a look at least every
``look_seconds``: a message that becomes due by time alone (a delay, a retry's
back-off), a lease lapsed on another host, another worker's hand-back. This
process's own hand-backs :meth:`QueueNews.forget` what it saw. A different set
of queue names (a pause or resume) is a different claim and is never skipped.
Without a listener (SQLite, which looks at the change counter and reads before
it claims) nothing is skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


class QueueNews:
    """The main thread's memory of its last short claim (main thread only)."""

    def __init__(self, heard: Callable[[], int] | None, look_seconds: float) -> None:
        """``heard()`` counts the namespace's notifications received so far (it may
        only grow); ``None`` where the database sends none."""
        self._heard = heard
        self._look_seconds = look_seconds
        self._seen: tuple[int, tuple[str, ...] | None, float] | None = None

    def heard(self) -> int | None:
        """The notification count to pass to :meth:`claimed`: read before the
        claim is sent, so a notification that arrives while it runs counts as news."""
        return None if self._heard is None else self._heard()

    def claimed(self, queue_names: Sequence[str] | None, heard: int | None, *, short: bool) -> None:
        """Notes a claim of ``queue_names`` sent when the count was ``heard``;
        ``short``: it returned fewer messages than it asked for."""
        if short and heard is not None:
            names = None if queue_names is None else tuple(queue_names)
            self._seen = (heard, names, time.monotonic())
        else:
            self._seen = None

    def worth_claiming(self, queue_names: Sequence[str] | None) -> bool:
        """False only while nothing new was heard since a short claim of the same
        ``queue_names``, less than ``look_seconds`` ago."""
        if self._seen is None or self._heard is None:
            return True
        heard, names, at = self._seen
        return (
            self._heard() != heard
            or names != (None if queue_names is None else tuple(queue_names))
            or time.monotonic() - at >= self._look_seconds
        )

    def forget(self) -> None:
        """Messages were made ready without a notification (a hand-back): claim next time."""
        self._seen = None
