"""``log(topic)`` → :class:`RetainedLog`: append, read, replay, group views and
retention of one configured topic's retained log."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from typing import Any

from later_django.core.clock import now_ms
from later_django.core.topics import key_bytes, partition_for_key
from later_django.logs.topic import (
    LogRecord,
    LogTopic,
    appended_before_ms,
    check_retention_limits,
    non_negative,
    positive,
)

#: (namespace, topic) → the round-robin counter of keyless records (per process).
_round_robin: dict[tuple[str, str], itertools.count[int]] = {}
_round_robin_lock = threading.Lock()


def log(topic: str) -> RetainedLog:
    """The retained log of ``topic`` (must be in ``LATER["TOPICS"]``; raises
    ``TopicNotConfigured`` otherwise, before anything is written)."""
    return RetainedLog(topic)


class RetainedLog:
    """The retained log of one configured topic. See :mod:`later_django.logs`."""

    def __init__(self, topic: str) -> None:
        self._topic = LogTopic(topic)

    @property
    def topic(self) -> str:
        return self._topic.topic

    @property
    def partitions(self) -> int:
        """The topic's fixed partition count."""
        return self._topic.partitions

    def partition_for(self, key: str | bytes | int) -> int:
        """The partition records with ``key`` go to."""
        return partition_for_key(key, self._topic.partitions)

    def append(self, key: str | bytes | int | None, payload: bytes) -> tuple[int, int]:
        """Appends one record; returns its ``(partition, offset)``."""
        return self.append_many([(key, payload)])[0]

    def append_many(
        self, records: Iterable[tuple[str | bytes | int | None, bytes]]
    ) -> list[tuple[int, int]]:
        """Appends ``(key, payload)`` records in one transaction (the caller's when
        inside ``atomic()``) with one statement per table; returns each record's
        ``(partition, offset)`` in input order.

        Offsets of a partition are contiguous and follow the input order. Every
        record is validated first: a bad key or payload raises (naming its
        position) and nothing is written. A rolled-back append leaves no record
        and no gap: the partition's next offset rolls back with it.
        """
        prepared = [self._prepare(position, item) for position, item in enumerate(records)]
        if not prepared:
            return []
        self._topic.ensure_registered()
        offsets = self._topic.store.append(
            self._topic.namespace, self._topic.topic, now_ms(), prepared
        )
        partitions = [partition for partition, _, _ in prepared]
        return list(zip(partitions, offsets, strict=True))

    def _prepare(self, position: int, item: Any) -> tuple[int, bytes | None, bytes]:
        try:
            key, payload = item
        except (TypeError, ValueError):
            raise TypeError(
                f"record {position} must be a (key, payload) pair, got {item!r}"
            ) from None
        if isinstance(payload, str):
            raise TypeError(
                f"record {position}: payload must be bytes, got str {payload[:40]!r}; "
                f"encode text yourself (e.g. payload.encode())"
            )
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(
                f"record {position}: payload must be bytes, got {type(payload).__name__}"
            )
        if key is None:
            return self._next_round_robin(), None, bytes(payload)
        try:
            stored_key = key_bytes(key)
        except TypeError:
            raise TypeError(
                f"record {position}: key must be str, bytes, int or None, got {key!r}"
            ) from None
        return partition_for_key(stored_key, self._topic.partitions), stored_key, bytes(payload)

    def _next_round_robin(self) -> int:
        marker = (self._topic.namespace, self._topic.topic)
        with _round_robin_lock:
            counter = _round_robin.setdefault(marker, itertools.count())
            return next(counter) % self._topic.partitions

    def read(self, partition: int, offset: int = 0, limit: int = 100) -> list[LogRecord]:
        """Up to ``limit`` retained records of ``partition`` from ``offset`` on, in
        offset order. Records removed by compaction or cleanup are skipped (offsets
        are never reused), so the offsets returned may have gaps."""
        self._topic.check_partition(partition)
        non_negative("offset", offset)
        positive("limit", limit)
        rows = self._topic.store.read(
            self._topic.namespace, self._topic.topic, partition, offset, limit
        )
        return [self._topic.record(partition, row) for row in rows]

    def end_offsets(self) -> dict[int, int]:
        """Partition → the offset the next record there will get (0 when empty)."""
        ends = self._topic.store.partition_ends(self._topic.namespace, self._topic.topic)
        return {partition: ends.get(partition, 0) for partition in range(self.partitions)}

    def group_offsets(self, group: str) -> dict[int, int]:
        """Partition → ``group``'s committed next offset (partitions it has rows for)."""
        return self._topic.store.group_offsets(self._topic.namespace, group, self._topic.topic)

    def group_leases(self, group: str) -> list[tuple[int, str | None, int, int]]:
        """``(partition, owner or None, lease_until_ms, epoch)`` of ``group``'s lease
        rows, by partition (lapsed leases included: compare ``lease_until_ms``)."""
        leases = self._topic.store.leases.leases((self._topic.namespace, group, self._topic.topic))
        return [
            (int(partition), lease.owner, int(lease.until_ms), int(lease.epoch))
            for (partition,), lease in sorted(leases.items())
        ]

    def groups(self) -> list[str]:
        """The consumer groups that have offsets on this topic (they pin retention)."""
        return self._topic.store.topic_groups(self._topic.namespace, self._topic.topic)

    def drop_group(self, group: str) -> None:
        """Forgets ``group`` on this topic (offsets, leases, members), so it no longer
        holds back compaction and cleanup. Its live members would re-create it."""
        self._topic.store.drop_group(self._topic.namespace, group, self._topic.topic)

    def compact(self) -> int:
        """Keeps the newest record per key: deletes keyed records that have a newer
        record with the same key in their partition, only below every group's
        committed offset for that partition (all records, when no group has one).
        Keyless records are kept. Returns how many records were deleted."""
        topic = self._topic
        return sum(
            topic.store.compact(topic.namespace, topic.topic, partition)
            for partition in range(topic.partitions)
        )

    def cleanup(self, older_than_seconds: float | None = None, keep_last: int | None = None) -> int:
        """Retention: deletes records appended more than ``older_than_seconds`` ago
        and/or (when both are given: and) beyond the newest ``keep_last`` of their
        partition, only below every group's committed offset for that partition.
        At least one limit is required. Returns how many records were deleted."""
        if older_than_seconds is None and keep_last is None:
            raise ValueError("cleanup needs older_than_seconds, keep_last or both")
        check_retention_limits(older_than_seconds, keep_last)
        before_ms = appended_before_ms(older_than_seconds)
        topic = self._topic
        return sum(
            topic.store.cleanup(topic.namespace, topic.topic, partition, before_ms, keep_last or 0)
            for partition in range(topic.partitions)
        )
