"""Retained-log storage on a Django connection: records, offsets, consumer groups.

Knows tables, not topics or settings: callers pass namespace, topic and
partition numbers already validated (``later_django.logs`` does). Every method
runs on ``connections[using]`` and joins the caller's transaction; the ones
that must be atomic on their own open ``atomic()`` (a savepoint inside the
caller's). SQL: :mod:`later_django.storage.sql.log`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from later_django.storage.db import AliasBound, SqlRunner, as_bytes
from later_django.storage.sql.log import LOG_SQL

#: Larger than any offset: the boundary of a partition no group has an offset in.
NO_BOUNDARY = 2**62

#: A stored record as read: ``(offset, key or None, payload, appended_at_ms)``.
StoredRecord = tuple[int, bytes | None, bytes, int]


class LogStore(AliasBound):
    """The ``later_log_*`` tables on the alias ``using``."""

    @property
    def _sql(self) -> SqlRunner:
        return SqlRunner(self.using, LOG_SQL)

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
        partitions = sorted(counts)
        runner = self._sql
        with transaction.atomic(using=self.using):
            if runner.vendor == "postgresql":
                ends = runner.fetch_all(
                    "partition_allocate",
                    [namespace, topic, partitions, [counts[p] for p in partitions]],
                )
            else:
                ends = runner.execute_values(
                    "partition_allocate",
                    [[namespace, topic, p, counts[p]] for p in partitions],
                    returning=True,
                )
            following = {partition: end - counts[partition] for partition, end in ends}
            offsets = []
            for partition, _, _ in records:
                offsets.append(following[partition])
                following[partition] += 1
            if runner.vendor == "postgresql":
                with runner.cursor() as cursor:
                    cursor.execute(
                        runner.sql("record_insert"),
                        [
                            namespace,
                            topic,
                            appended_at_ms,
                            [partition for partition, _, _ in records],
                            offsets,
                            [key for _, key, _ in records],
                            [payload for _, _, payload in records],
                        ],
                    )
            else:
                runner.execute_values(
                    "record_insert",
                    [
                        [namespace, topic, partition, offset, key, payload, appended_at_ms]
                        for (partition, key, payload), offset in zip(records, offsets, strict=True)
                    ],
                )
        return offsets

    def read(
        self, namespace: str, topic: str, partition: int, from_offset: int, limit: int
    ) -> list[StoredRecord]:
        """Up to ``limit`` retained records of ``partition`` at or after ``from_offset``."""
        rows = self._sql.fetch_all("record_read", [namespace, topic, partition, from_offset, limit])
        return [_stored(row) for row in rows]

    def group_read(
        self, namespace: str, group: str, topic: str, partition: int, limit: int
    ) -> list[StoredRecord]:
        """Up to ``limit`` records of ``partition`` from ``group``'s committed offset
        (none when the group has no offset row there)."""
        rows = self._sql.fetch_all(
            "group_read",
            [namespace, group, topic, partition, namespace, topic, partition, limit],
        )
        return [_stored(row) for row in rows]

    def partition_ends(self, namespace: str, topic: str) -> dict[int, int]:
        """Partition → next offset, for the partitions that ever had a record."""
        return dict(self._sql.fetch_all("partition_ends", [namespace, topic]))

    # --- maintenance ---

    def compact(self, namespace: str, topic: str, partition: int) -> int:
        """Deletes keyed records of ``partition`` that have a newer record with the
        same key, only below every group's committed offset; returns how many."""
        where = [namespace, topic, partition]
        return self._sql.execute(
            "compact",
            [*where, *_boundary(namespace, topic, partition), *where],
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
        where = [namespace, topic, partition]
        return self._sql.execute(
            "cleanup",
            [
                *where,
                *_boundary(namespace, topic, partition),
                appended_before_ms,
                *where,
                keep_last,
            ],
        )

    # --- consumer groups ---

    def group_offsets(self, namespace: str, group: str, topic: str) -> dict[int, int]:
        """Partition → ``group``'s next offset."""
        return dict(self._sql.fetch_all("group_offsets", [namespace, group, topic]))

    def topic_groups(self, namespace: str, topic: str) -> list[str]:
        """The groups with committed offsets on ``topic``."""
        return sorted(group for (group,) in self._sql.fetch_all("topic_groups", [namespace, topic]))

    def group_ensure(
        self, namespace: str, group: str, topic: str, partitions: int, now_ms: int
    ) -> None:
        """Creates the lease rows (free, epoch 0) and offset rows (offset 0) of every
        partition that lacks one: a group pins the log from the moment it joins."""
        runner = self._sql
        ids = runner.list_param(list(range(partitions)))
        with transaction.atomic(using=self.using):
            runner.execute("lease_ensure", [namespace, group, topic, ids])
            runner.execute("offset_ensure", [namespace, group, topic, now_ms, ids])

    def member_beat(
        self, namespace: str, group: str, topic: str, member_id: str, now_ms: int
    ) -> None:
        """Records a heartbeat of ``member_id`` (joining it if it has no row)."""
        self._sql.execute("member_beat", [namespace, group, topic, member_id, now_ms, now_ms])

    def members_live(
        self, namespace: str, group: str, topic: str, heartbeat_since_ms: int
    ) -> list[str]:
        """Members whose last heartbeat is at or after ``heartbeat_since_ms``."""
        rows = self._sql.fetch_all("members_live", [namespace, group, topic, heartbeat_since_ms])
        return sorted(member for (member,) in rows)

    def member_remove(self, namespace: str, group: str, topic: str, member_id: str) -> None:
        self._sql.execute("member_remove", [namespace, group, topic, member_id])

    def members_purge(
        self, namespace: str, group: str, topic: str, heartbeat_before_ms: int
    ) -> int:
        """Deletes the rows of members silent since before ``heartbeat_before_ms``."""
        return self._sql.execute("members_purge", [namespace, group, topic, heartbeat_before_ms])

    def lease_state(
        self, namespace: str, group: str, topic: str
    ) -> list[tuple[int, str | None, int, int]]:
        """``(partition, owner, lease_until_ms, epoch)`` of every lease row."""
        return [tuple(row) for row in self._sql.fetch_all("lease_state", [namespace, group, topic])]  # type: ignore[misc]

    def lease_rebalance(
        self,
        namespace: str,
        group: str,
        topic: str,
        owner: str,
        wanted: Sequence[int],
        now_ms: int,
        lease_until_ms: int,
    ) -> dict[int, int]:
        """In one statement: releases ``owner``'s leases outside ``wanted``, renews its
        leases in ``wanted`` and takes those that are free or lapsed (epoch + 1 when
        the owner changes). Returns partition → epoch of what ``owner`` now holds."""
        runner = self._sql
        ids = runner.list_param(sorted(wanted))
        rows = runner.fetch_all(
            "lease_rebalance",
            [
                *(ids, owner, ids, lease_until_ms, ids, owner),
                *(namespace, group, topic, owner, ids, now_ms),
            ],
        )
        return {partition: epoch for partition, holder, epoch in rows if holder == owner}

    def lease_release_all(self, namespace: str, group: str, topic: str, owner: str) -> int:
        """Frees every lease ``owner`` holds (epoch kept; the next taker raises it)."""
        return self._sql.execute("lease_release_all", [namespace, group, topic, owner])

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
        with ``epoch``; False (nothing changed) otherwise."""
        key = [namespace, group, topic, partition]
        changed = self._sql.fetch_all(
            "offset_commit", [*key, owner, epoch, next_offset, now_ms, *key]
        )
        return len(changed) == 1

    def drop_group(self, namespace: str, group: str, topic: str) -> None:
        """Forgets ``group`` on ``topic``: offsets, leases, members."""
        runner = self._sql
        with transaction.atomic(using=self.using):
            for name in ("group_drop_offsets", "group_drop_leases", "group_drop_members"):
                runner.execute(name, [namespace, group, topic])


def _boundary(namespace: str, topic: str, partition: int) -> list[Any]:
    """The parameters of the SQL's safety boundary (lowest group offset, else none)."""
    return [namespace, topic, partition, NO_BOUNDARY]


def _stored(row: tuple[Any, ...]) -> StoredRecord:
    offset, key, payload, appended_at = row
    return offset, as_bytes(key), as_bytes(payload), appended_at
