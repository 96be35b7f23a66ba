"""Topic registrations: the partition count each topic was first used with, ``later_topic``.

One row per ``(namespace, topic)``, written once and never changed: a topic's
partition count is part of its identity (keys are routed by it). What to do
when a process is configured with another count is the engine's rule
(:func:`later_django.engine.topics.register_topic`); this store only reads and
records.
"""

from __future__ import annotations

from later_django.core.clock import now_ms
from later_django.storage.driver import Driver
from later_django.storage.queries.topics import TopicQueries


class TopicStore:
    """``later_topic`` on one driver's connection. Every call joins the caller's
    transaction when there is one and autocommits otherwise."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(TopicQueries)

    def stored_partitions(self, namespace: str, topic: str) -> int | None:
        """The partition count recorded for ``topic`` in ``namespace``, or ``None``."""
        row = self._driver.fetch_one(
            self._q.stored_partitions, {"namespace": namespace, "topic": topic}
        )
        return None if row is None else int(row[0])

    def record_if_absent(self, namespace: str, topic: str, partitions: int) -> int:
        """Records ``topic`` with ``partitions`` unless a count is recorded already;
        returns the count recorded after the call (``partitions``, or the one found).

        Race-safe and never fails on a duplicate: of concurrent callers exactly one
        writes the row (the insert does nothing on a conflict, so the caller's
        transaction is not broken) and all of them return that row's count. A
        recorded topic costs one read and no write.
        """
        stored = self.stored_partitions(namespace, topic)
        if stored is not None:
            return stored
        params = {"namespace": namespace, "topic": topic, "partitions": partitions, "now": now_ms()}
        if self._driver.execute(self._q.insert_if_absent, params):
            return partitions
        stored = self.stored_partitions(namespace, topic)
        if stored is None:
            raise LookupError(
                f"topic {topic!r} in namespace {namespace!r}: the insert found a row of it "
                "but no row reads back; later_topic rows must never be deleted"
            )
        return stored
