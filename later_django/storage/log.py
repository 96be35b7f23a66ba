"""``LogStore``: the retained-log tables: records, offsets, consumer groups.

Knows tables, not topics or settings: callers pass namespace, topic and
partition numbers already validated (:mod:`later_django.logs` does). Every
method joins the caller's transaction; those that must be atomic on their own
open one (a savepoint inside the caller's).

The consumer-group leases are the one fenced lease
(:mod:`later_django.storage.leases` on ``later_log_consumer_lease``, scope
``(namespace, group, topic)``, one slot per partition): ``store.leases``
(``hold`` rebalances, ``release`` leaves, ``leases`` reads).
:meth:`LogStore.offset_commit` is fenced by the lease in its own statement.

Statements: :mod:`later_django.storage.queries.log`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from later_django.storage.driver import Driver, Row, as_bytes
from later_django.storage.leases import LeaseStore
from later_django.storage.queries.leases import CONSUMER_LEASES
from later_django.storage.queries.log import LogQueries

#: Larger than any offset: the boundary of a partition no group has an offset in.
NO_BOUNDARY = 2**62

#: A stored record as read: ``(offset, key or None, payload, appended_at_ms)``.
StoredRecord = tuple[int, bytes | None, bytes, int]


class LogStore:
    """The ``later_log_*`` tables on ``driver``'s database."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(LogQueries)
        #: The consumer-group leases (scope ``(namespace, group, topic)``, slot: partition).
        self.leases = LeaseStore(driver, CONSUMER_LEASES)

    # --- records ---

    def append(
        self,
        namespace: str,
        topic: str,
        appended_at_ms: int,
        records: Sequence[tuple[int, bytes | None, bytes]],
    ) -> list[int]:
        """Appends ``(partition, key, payload)`` records; returns each one's offset.

        Two statements in one transaction (a savepoint inside the caller's): the
        partitions' next offsets are raised by their record counts (one upsert,
        partition order, so concurrent appenders lock rows in one order), then
        every record is inserted (one statement). Offsets within a partition
        follow the order of ``records``. The partition rows stay locked until
        the transaction ends, so offsets of a partition become visible in order
        and a rollback returns them (no gap).
        """
        if not records:
            return []
        counts: dict[int, int] = {}
        for partition, _, _ in records:
            counts[partition] = counts.get(partition, 0) + 1
        where = {"namespace": namespace, "topic": topic}
        with self._driver.atomic():
            ends = self._driver.execute_rows(
                self._q.partition_allocate,
                [{"partition_id": p, "count": counts[p]} for p in sorted(counts)],
                where,
                returning=True,
            )
            following = {int(partition): int(end) - counts[partition] for partition, end in ends}
            offsets = []
            for partition, _, _ in records:
                offsets.append(following[partition])
                following[partition] += 1
            self._driver.execute_rows(
                self._q.record_insert,
                [
                    {"partition_id": p, "record_offset": o, "record_key": k, "payload": v}
                    for (p, k, v), o in zip(records, offsets, strict=True)
                ],
                {**where, "appended_at": appended_at_ms},
            )
        return offsets

    def read(
        self, namespace: str, topic: str, partition: int, from_offset: int, limit: int
    ) -> list[StoredRecord]:
        """Up to ``limit`` retained records of ``partition`` at or after ``from_offset``."""
        rows = self._driver.fetch_all(
            self._q.record_read,
            {
                **_partition(namespace, topic, partition),
                "from_offset": from_offset,
                "limit": limit,
            },
        )
        return [_stored(row) for row in rows]

    def group_read(
        self, namespace: str, group: str, topic: str, partition: int, limit: int
    ) -> list[StoredRecord]:
        """Up to ``limit`` records of ``partition`` from ``group``'s committed offset
        (none when the group has no offset row there)."""
        rows = self._driver.fetch_all(
            self._q.group_read,
            {**_partition(namespace, topic, partition), "group_name": group, "limit": limit},
        )
        return [_stored(row) for row in rows]

    def partition_ends(self, namespace: str, topic: str) -> dict[int, int]:
        """Partition → next offset, for the partitions that ever had a record."""
        rows = self._driver.fetch_all(
            self._q.partition_ends, {"namespace": namespace, "topic": topic}
        )
        return dict(rows)

    # --- retention ---

    def compact(self, namespace: str, topic: str, partition: int) -> int:
        """Deletes keyed records of ``partition`` that have a newer record with the
        same key, only below every group's committed offset; returns how many."""
        return self._driver.execute(
            self._q.compact, {**_partition(namespace, topic, partition), "no_boundary": NO_BOUNDARY}
        )

    def cleanup(
        self,
        namespace: str,
        topic: str,
        partition: int,
        appended_before_ms: int,
        keep_last: int,
    ) -> int:
        """Deletes records of ``partition`` appended before ``appended_before_ms`` and
        not among its newest ``keep_last`` offsets, only below every group's
        committed offset; returns how many."""
        return self._driver.execute(
            self._q.cleanup,
            {
                **_partition(namespace, topic, partition),
                "no_boundary": NO_BOUNDARY,
                "appended_before": appended_before_ms,
                "keep_last": keep_last,
            },
        )

    # --- consumer groups ---

    def group_offsets(self, namespace: str, group: str, topic: str) -> dict[int, int]:
        """Partition → ``group``'s next offset."""
        rows = self._driver.fetch_all(self._q.group_offsets, _group(namespace, group, topic))
        return dict(rows)

    def topic_groups(self, namespace: str, topic: str) -> list[str]:
        """The groups with offset rows on ``topic``: joined (offsets at 0) or committed."""
        rows = self._driver.fetch_all(
            self._q.topic_groups, {"namespace": namespace, "topic": topic}
        )
        return sorted(group for (group,) in rows)

    def group_ensure(
        self, namespace: str, group: str, topic: str, partitions: int, now_ms: int
    ) -> None:
        """Creates the lease rows (free, epoch 0) and offset rows (offset 0) of every
        partition that lacks one, in one transaction: a group pins the log from the
        moment it joins."""
        ids = list(range(partitions))
        with self._driver.atomic():
            self.leases.ensure((namespace, group, topic), ids)
            self._driver.execute(
                self._q.offset_ensure,
                {
                    **_group(namespace, group, topic),
                    "now": now_ms,
                    "partitions": self._driver.list_param(ids),
                },
            )

    def member_beat(
        self, namespace: str, group: str, topic: str, member_id: str, now_ms: int
    ) -> None:
        """Records a heartbeat of ``member_id`` (joining it if it has no row)."""
        self._driver.execute(
            self._q.member_beat,
            {**_group(namespace, group, topic), "member_id": member_id, "now": now_ms},
        )

    def members_live(
        self, namespace: str, group: str, topic: str, heartbeat_since_ms: int
    ) -> list[str]:
        """Members whose last heartbeat is at or after ``heartbeat_since_ms``."""
        rows = self._driver.fetch_all(
            self._q.members_live,
            {**_group(namespace, group, topic), "heartbeat_since": heartbeat_since_ms},
        )
        return sorted(member for (member,) in rows)

    def member_remove(self, namespace: str, group: str, topic: str, member_id: str) -> None:
        self._driver.execute(
            self._q.member_remove, {**_group(namespace, group, topic), "member_id": member_id}
        )

    def members_purge(
        self, namespace: str, group: str, topic: str, heartbeat_before_ms: int
    ) -> int:
        """Deletes the rows of members silent since before ``heartbeat_before_ms``."""
        return self._driver.execute(
            self._q.members_purge,
            {**_group(namespace, group, topic), "heartbeat_before": heartbeat_before_ms},
        )

    def offset_commit(
        self,
        namespace: str,
        group: str,
        topic: str,
        partition: int,
        owner: str,
        epoch: int,
        next_offset: int,
        now_ms: int,
    ) -> bool:
        """Sets ``group``'s next offset of ``partition`` if ``owner`` holds its lease
        with ``epoch`` (checked in the same statement, which on PostgreSQL holds
        the lease row until the transaction ends); False (nothing changed) otherwise."""
        changed = self._driver.fetch_all(
            self._q.offset_commit,
            {
                **_group(namespace, group, topic),
                "partition_id": partition,
                "owner": owner,
                "epoch": epoch,
                "next_offset": next_offset,
                "now": now_ms,
            },
        )
        return len(changed) == 1

    def drop_group(self, namespace: str, group: str, topic: str) -> None:
        """Forgets ``group`` on ``topic`` in one transaction: offsets, leases, members."""
        params = _group(namespace, group, topic)
        with self._driver.atomic():
            for sql in (
                self._q.group_drop_offsets,
                self._q.group_drop_leases,
                self._q.group_drop_members,
            ):
                self._driver.execute(sql, params)


def _group(namespace: str, group: str, topic: str) -> dict[str, Any]:
    """The parameters naming a consumer group (the consumer lease's scope)."""
    return {"namespace": namespace, "group_name": group, "topic": topic}


def _partition(namespace: str, topic: str, partition: int) -> dict[str, Any]:
    return {"namespace": namespace, "topic": topic, "partition_id": partition}


def _stored(row: Row) -> StoredRecord:
    offset, key, payload, appended_at = row
    return offset, as_bytes(key), as_bytes(payload), appended_at
