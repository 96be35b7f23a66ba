"""Retained logs: append-only, replayable records per topic partition, and consumer
groups that share a topic's partitions under fenced leases.

This is a log kept in the application's database, not Kafka: throughput is
bounded by the database, there is no broker, consumers poll, and retention
(``compact``/``cleanup``) runs when you run it. See docs/retained-logs.md.

* ``log(topic)`` → :class:`RetainedLog`: ``append``, ``append_many``, ``read``,
  ``compact``, ``cleanup``. A topic must be in ``LATER["TOPICS"]``; its fixed
  partition count routes keys (the same layout as topic-partitioned jobs).
* ``consumer(group, topic)`` → :class:`Consumer`: ``join``/``leave`` (or
  ``with``), ``heartbeat``, ``poll``, ``commit``, ``commit_records``,
  ``assignment``. Delivery is at-least-once: commit after processing.

Payloads are bytes (``bytes``, ``bytearray`` or ``memoryview``); ``str`` is
refused, encode it yourself. Keys are ``str`` (stored as UTF-8), ``bytes``,
``int`` (stored as its decimal text) or ``None``; a keyed record goes to the
partition of its key, keyless records are spread round robin (per process) and
are never removed by compaction. Everything writes on ``LATER["DATABASE"]`` and
joins the caller's ``transaction.atomic()``.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from django.db import connections, transaction

from later_django.conf import LaterSettings, later_settings
from later_django.core import rendezvous
from later_django.core.clock import now_ms
from later_django.core.keys import RESERVED_PREFIX
from later_django.core.topics import key_bytes, partition_for_key
from later_django.engine.topics import register_topic, topic_partitions
from later_django.exceptions import StaleLease, TopicNotConfigured
from later_django.storage.log import LogStore
from later_django.storage.stores import stores_for

__all__ = [
    "Consumer",
    "LogRecord",
    "RetainedLog",
    "StaleLease",
    "consumer",
    "log",
    "retention_pass",
]

#: A group name or member id is stored in a 200-character column.
MAX_NAME_LENGTH = 200
#: Members silent for this many lease periods lose their row (they rejoin on their next beat).
MEMBER_PURGE_LEASES = 10


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One retained record. ``key`` is the stored key bytes (``None`` when keyless);
    ``appended_at`` is the time of its append (UTC)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    payload: bytes
    appended_at: datetime

    @property
    def next_offset(self) -> int:
        """The offset to commit once this record is processed."""
        return self.offset + 1


def log(topic: str) -> RetainedLog:
    """The retained log of ``topic`` (must be in ``LATER["TOPICS"]``; raises
    ``TopicNotConfigured`` otherwise, before anything is written)."""
    return RetainedLog(topic)


def consumer(
    group: str, topic: str, member_id: str | None = None, lease_seconds: float = 30.0
) -> Consumer:
    """A member of consumer ``group`` on ``topic``; use it as a context manager or
    call ``join()``/``leave()``. ``member_id`` defaults to host-pid-random."""
    return Consumer(group, topic, member_id=member_id, lease_seconds=lease_seconds)


class _Topic:
    """A configured topic on the configured database: namespace, alias, partitions."""

    def __init__(self, topic: str) -> None:
        settings: LaterSettings = later_settings()
        if not isinstance(topic, str) or topic.startswith(RESERVED_PREFIX):
            raise TopicNotConfigured(
                f"topic {topic!r} cannot hold a retained log: use a topic of "
                f"LATER['TOPICS'] (names starting with {RESERVED_PREFIX!r} are reserved)"
            )
        self.topic = topic
        self.partitions = topic_partitions(settings, topic)
        self.namespace = settings.namespace
        self.using = settings.database
        self.store = LogStore(self.using)

    def ensure_registered(self) -> None:
        """Records the topic's layout in ``later_topic`` once per process and database;
        raises ``TopicLayoutMismatch`` when the stored count differs."""
        marker = (
            self.using,
            str(connections[self.using].settings_dict.get("NAME")),
            self.namespace,
            self.topic,
            self.partitions,
        )
        if marker in _registered:
            return
        register_topic(stores_for(self.using), self.namespace, self.topic, self.partitions)
        _registered.add(marker)

    def check_partition(self, partition: int) -> int:
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise TypeError(f"partition must be an int, got {partition!r}")
        if not 0 <= partition < self.partitions:
            raise ValueError(
                f"partition {partition} is out of range for topic {self.topic!r} "
                f"(partitions 0 to {self.partitions - 1})"
            )
        return partition

    def record(self, partition: int, stored: tuple[int, bytes | None, bytes, int]) -> LogRecord:
        offset, key, payload, appended_at = stored
        return LogRecord(
            self.topic,
            partition,
            offset,
            key,
            payload,
            datetime.fromtimestamp(appended_at / 1000, tz=UTC),
        )


_registered: set[tuple[Any, ...]] = set()
_round_robin: dict[tuple[str, str], itertools.count[int]] = {}
_round_robin_lock = threading.Lock()


def _non_negative(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


def _check_retention_limits(older_than_seconds: Any, keep_last: Any) -> None:
    """Raises ``ValueError`` naming a retention limit that is not a non-negative number."""
    if keep_last is not None:
        _non_negative("keep_last", keep_last)
    if older_than_seconds is not None and (
        isinstance(older_than_seconds, bool)
        or not isinstance(older_than_seconds, int | float)
        or older_than_seconds < 0
    ):
        raise ValueError(
            f"older_than_seconds must be a non-negative number, got {older_than_seconds!r}"
        )


def _appended_before_ms(older_than_seconds: float | None) -> int:
    """The age bound of a cleanup: records appended before it are old enough."""
    if older_than_seconds is None:
        return 2**62
    return now_ms() - int(older_than_seconds * 1000)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


class RetainedLog:
    """The retained log of one configured topic. See the module docstring."""

    def __init__(self, topic: str) -> None:
        self._topic = _Topic(topic)

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
        _non_negative("offset", offset)
        _positive("limit", limit)
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
        return self._topic.store.lease_state(self._topic.namespace, group, self._topic.topic)

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
        _check_retention_limits(older_than_seconds, keep_last)
        before_ms = _appended_before_ms(older_than_seconds)
        topic = self._topic
        return sum(
            topic.store.cleanup(topic.namespace, topic.topic, partition, before_ms, keep_last or 0)
            for partition in range(topic.partitions)
        )


def _default_member_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _name(label: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_LENGTH:
        raise ValueError(
            f"{label} must be a non-empty str of at most {MAX_NAME_LENGTH} characters, "
            f"got {value!r}"
        )
    return value


class Consumer:
    """One member of a consumer group on a topic.

    Members are live while they heartbeat within ``lease_seconds`` (``poll``
    heartbeats when due; call ``heartbeat()`` during long processing). Each
    partition belongs to one live member chosen by rendezvous hashing, and a
    member reads and commits a partition only under its lease in
    ``later_log_consumer_lease``: owner, ``lease_until`` and an epoch that rises
    on every change of owner. A member hands back a partition it no longer
    wins at its next rebalance and releases all at ``leave()``; the lease of a
    silent member lapses after ``lease_seconds`` and is taken over (epoch + 1).
    All members of a group should use the same ``lease_seconds``. Not thread-safe:
    one ``Consumer`` per thread (each with its own member id).

    ``poll`` returns records from the group's committed offsets, so a record
    comes back until it is committed: at-least-once delivery, commit after
    processing. A commit is accepted only while this member holds the
    partition's lease with the epoch it acquired; otherwise it raises
    :class:`~later_django.exceptions.StaleLease` and changes nothing.
    """

    def __init__(
        self,
        group: str,
        topic: str,
        member_id: str | None = None,
        lease_seconds: float = 30.0,
    ) -> None:
        if (
            isinstance(lease_seconds, bool)
            or not isinstance(lease_seconds, int | float)
            or not 0.05 <= lease_seconds <= 86_400
        ):
            raise ValueError(
                f"lease_seconds must be a number from 0.05 to 86400, got {lease_seconds!r}"
            )
        self._topic = _Topic(topic)
        self.group = _name("group", group)
        self.member_id = _name("member_id", member_id or _default_member_id())
        self.lease_seconds = float(lease_seconds)
        #: A member rebalances (heartbeat, renew, hand over) at least this often when polling.
        self.rebalance_seconds = min(self.lease_seconds / 3, 1.0)
        self._held: dict[int, int] = {}
        self._joined = False
        self._last_rebalance = 0.0
        self._poll_start = 0

    @property
    def topic(self) -> str:
        return self._topic.topic

    def __enter__(self) -> Consumer:
        return self.join()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.leave()

    def __repr__(self) -> str:
        return (
            f"<Consumer group={self.group!r} topic={self.topic!r} member={self.member_id!r} "
            f"partitions={self.assignment()}>"
        )

    # --- membership ---

    def join(self) -> Consumer:
        """Joins the group: creates its offset rows (offset 0, the start of the
        retained log) and lease rows where missing, heartbeats and takes the
        partitions this member wins that are free. Returns ``self``."""
        topic = self._topic
        topic.ensure_registered()
        topic.store.group_ensure(
            topic.namespace, self.group, topic.topic, topic.partitions, now_ms()
        )
        self._joined = True
        self.heartbeat()
        return self

    def leave(self) -> None:
        """Releases every lease of this member at once and removes its member row;
        the other members take its partitions at their next rebalance."""
        topic = self._topic
        with transaction.atomic(using=topic.using):
            topic.store.lease_release_all(topic.namespace, self.group, topic.topic, self.member_id)
            topic.store.member_remove(topic.namespace, self.group, topic.topic, self.member_id)
        self._held = {}
        self._joined = False

    def heartbeat(self) -> list[int]:
        """Records this member as live and rebalances: hands back partitions another
        live member now wins, renews its leases, takes free or lapsed partitions
        it wins. Returns the partitions held afterwards."""
        if not self._joined:
            self.join()
            return self.assignment()
        topic = self._topic
        now = now_ms()
        lease_ms = int(self.lease_seconds * 1000)
        with transaction.atomic(using=topic.using):
            topic.store.member_beat(topic.namespace, self.group, topic.topic, self.member_id, now)
            live = topic.store.members_live(
                topic.namespace, self.group, topic.topic, now - lease_ms
            )
            if self.member_id not in live:
                live.append(self.member_id)
            wanted = [
                partition
                for partition in range(topic.partitions)
                if rendezvous.owner(live, self.group, topic.topic, partition) == self.member_id
            ]
            self._held = topic.store.lease_rebalance(
                topic.namespace,
                self.group,
                topic.topic,
                self.member_id,
                wanted,
                now,
                now + lease_ms,
            )
            topic.store.members_purge(
                topic.namespace, self.group, topic.topic, now - MEMBER_PURGE_LEASES * lease_ms
            )
        self._last_rebalance = time.monotonic()
        return self.assignment()

    def assignment(self) -> list[int]:
        """The partitions this member held at its last rebalance, ascending."""
        return sorted(self._held)

    def epoch(self, partition: int) -> int | None:
        """The epoch of this member's lease on ``partition`` (None when not held)."""
        return self._held.get(partition)

    # --- records ---

    def poll(self, limit: int = 100) -> list[LogRecord]:
        """Up to ``limit`` records of the held partitions, each partition from the
        group's committed offset (uncommitted records come back on the next poll).
        Joins first if needed and rebalances when due (every ``rebalance_seconds``).
        Partitions take turns being read first, so one busy partition does not
        starve the others."""
        _positive("limit", limit)
        if not self._joined or time.monotonic() - self._last_rebalance >= self.rebalance_seconds:
            self.heartbeat()
        held = self.assignment()
        if not held:
            return []
        topic = self._topic
        start = self._poll_start % len(held)
        self._poll_start += 1
        records: list[LogRecord] = []
        for partition in held[start:] + held[:start]:
            remaining = limit - len(records)
            if remaining <= 0:
                break
            rows = topic.store.group_read(
                topic.namespace, self.group, topic.topic, partition, remaining
            )
            records.extend(topic.record(partition, row) for row in rows)
        return records

    def committed(self) -> dict[int, int]:
        """Partition → the group's committed next offset."""
        topic = self._topic
        return topic.store.group_offsets(topic.namespace, self.group, topic.topic)

    def commit(self, partition: int, next_offset: int) -> None:
        """Sets the group's next offset of ``partition`` (the offset after the last
        record processed). Accepted only while this member holds the partition's
        lease with the same epoch; otherwise raises ``StaleLease`` and nothing
        changes (the partition is dropped from this member's assignment)."""
        topic = self._topic
        topic.check_partition(partition)
        _non_negative("next_offset", next_offset)
        epoch = self._held.get(partition)
        if epoch is None:
            raise StaleLease(
                f"member {self.member_id!r} of group {self.group!r} does not hold partition "
                f"{partition} of topic {topic.topic!r} (held: {self.assignment()}); "
                f"offset {next_offset} not committed"
            )
        accepted = topic.store.offset_commit(
            topic.namespace,
            self.group,
            topic.topic,
            partition,
            self.member_id,
            epoch,
            next_offset,
            now_ms(),
        )
        if not accepted:
            self._held.pop(partition, None)
            raise StaleLease(
                f"member {self.member_id!r} of group {self.group!r} lost partition {partition} "
                f"of topic {topic.topic!r}: its lease (epoch {epoch}) was taken over or "
                f"released; offset {next_offset} not committed"
            )

    def commit_records(self, records: Iterable[LogRecord]) -> dict[int, int]:
        """Commits, per partition, the offset after the highest record given, in one
        transaction: if any partition's lease is stale, ``StaleLease`` is raised and
        no offset changes. Returns partition → committed next offset."""
        highest: dict[int, int] = {}
        for record in records:
            if record.topic != self.topic:
                raise ValueError(
                    f"record of topic {record.topic!r} given to a consumer of {self.topic!r}"
                )
            highest[record.partition] = max(highest.get(record.partition, -1), record.offset)
        targets = {partition: offset + 1 for partition, offset in sorted(highest.items())}
        if not targets:
            return {}
        with transaction.atomic(using=self._topic.using):
            for partition, next_offset in targets.items():
                self.commit(partition, next_offset)
        return targets


def retention_pass(
    topic: str,
    *,
    compact: bool = True,
    older_than_seconds: float | None = None,
    keep_last: int | None = None,
    interval_seconds: float = 300.0,
    max_run_seconds: float = 30.0,
) -> Any:
    """A maintenance pass (``later_django.maintenance.MaintenancePass``) named
    ``log_retention.<topic>`` that compacts ``topic`` (when ``compact``) and cleans
    it up by ``older_than_seconds`` / ``keep_last`` (when given), partition by
    partition (from a random one) until its budget is spent, about every ``interval_seconds``.

    later_django registers none by itself (retention is yours to choose); register
    it from a module listed in ``LATER["MAINTENANCE_MODULES"]``::

        register_pass(retention_pass("audit", older_than_seconds=30 * 86400))
    """
    from later_django.maintenance import MaintenancePass, PassContext

    if not compact and older_than_seconds is None and keep_last is None:
        raise ValueError("retention_pass needs compact=True, older_than_seconds or keep_last")
    _check_retention_limits(older_than_seconds, keep_last)
    cleans = older_than_seconds is not None or keep_last is not None

    def run(context: PassContext) -> int:
        partitions = topic_partitions(context.settings, topic)
        store = LogStore(context.using)
        before_ms = _appended_before_ms(older_than_seconds)
        removed = 0
        start = random.randrange(partitions)  # a spent budget must not starve the last ones
        for partition in [*range(start, partitions), *range(start)]:
            if context.out_of_time():
                break
            if compact:
                removed += store.compact(context.namespace, topic, partition)
            if cleans:
                removed += store.cleanup(
                    context.namespace, topic, partition, before_ms, keep_last or 0
                )
        return removed

    name = "log_retention." + "".join(c if c.isalnum() or c == "_" else "_" for c in topic)
    return MaintenancePass(name, interval_seconds, run, max_run_seconds=max_run_seconds)
