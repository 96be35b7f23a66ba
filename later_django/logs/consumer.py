"""``consumer(group, topic)`` → :class:`Consumer`: one member of a consumer group,
sharing the topic's partitions with the group's other live members under the
one fenced lease (``later_log_consumer_lease``, :mod:`later_django.storage.leases`)."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from django.db import transaction

from later_django.core import rendezvous
from later_django.core.clock import now_ms
from later_django.exceptions import StaleLease
from later_django.logs.topic import LogRecord, LogTopic, non_negative, positive

#: A group name or member id is stored in a 200-character column.
MAX_NAME_LENGTH = 200
#: Members silent for this many lease periods lose their row (they rejoin on their next beat).
MEMBER_PURGE_LEASES = 10


def consumer(
    group: str, topic: str, member_id: str | None = None, lease_seconds: float = 30.0
) -> Consumer:
    """A member of consumer ``group`` on ``topic``; use it as a context manager or
    call ``join()``/``leave()``. ``member_id`` defaults to host-pid-random."""
    return Consumer(group, topic, member_id=member_id, lease_seconds=lease_seconds)


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
        self._topic = LogTopic(topic)
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

    @property
    def _scope(self) -> tuple[str, str, str]:
        """This group's consumer leases: ``(namespace, group, topic)``."""
        return (self._topic.namespace, self.group, self._topic.topic)

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
            topic.store.leases.release(self._scope, self.member_id)
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
            self._held = topic.store.leases.hold(
                self._scope, self.member_id, wanted, until_ms=now + lease_ms, now_ms=now
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
        positive("limit", limit)
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
        non_negative("next_offset", next_offset)
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
