"""The log port: retained logs, consumer-group offsets and members.

``LogPort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from later_django.storage.log import StoredRecord
from later_django.storage.ports.leases import LeasePort


@runtime_checkable
class LogPort(Protocol):
    """Retained logs: batched appends, reads, consumer-group offsets, members and the fenced
    offset commit (``later_log_*``). Implemented by
    :class:`~later_django.storage.log.LogStore`."""

    @property
    def leases(self) -> LeasePort:
        """The consumer-group leases (one lease table: ``later_log_consumer_lease``)."""

    def append(
        self,
        namespace: str,
        topic: str,
        appended_at_ms: int,
        records: Sequence[tuple[int, bytes | None, bytes]],
    ) -> list[int]:
        """Appends ``(partition, key, payload)`` records; returns each one's offset."""

    def read(
        self, namespace: str, topic: str, partition: int, from_offset: int, limit: int
    ) -> list[StoredRecord]:
        """Up to ``limit`` retained records of ``partition`` at or after ``from_offset``."""

    def group_read(
        self, namespace: str, group: str, topic: str, partition: int, limit: int
    ) -> list[StoredRecord]:
        """Up to ``limit`` records of ``partition`` from ``group``'s committed offset (none when
        the group has no offset row there)."""

    def partition_ends(self, namespace: str, topic: str) -> dict[int, int]:
        """Partition → next offset, for the partitions that ever had a record."""

    def compact(self, namespace: str, topic: str, partition: int) -> int:
        """Deletes keyed records of ``partition`` that have a newer record with the same key,
        only below every group's committed offset; returns how many."""

    def cleanup(
        self,
        namespace: str,
        topic: str,
        partition: int,
        appended_before_ms: int,
        keep_last: int,
    ) -> int:
        """Deletes records of ``partition`` appended before ``appended_before_ms`` and not among
        its newest ``keep_last`` offsets, only below every group's committed offset; returns
        how many."""

    def group_offsets(self, namespace: str, group: str, topic: str) -> dict[int, int]:
        """Partition → ``group``'s next offset."""

    def topic_groups(self, namespace: str, topic: str) -> list[str]:
        """The groups with offset rows on ``topic``: joined (offsets at 0) or committed."""

    def group_ensure(
        self, namespace: str, group: str, topic: str, partitions: int, now_ms: int
    ) -> None:
        """Creates the lease rows (free, epoch 0) and offset rows (offset 0) of every partition
        that lacks one, in one transaction: a group pins the log from the moment it joins."""

    def member_beat(
        self, namespace: str, group: str, topic: str, member_id: str, now_ms: int
    ) -> None:
        """Records a heartbeat of ``member_id`` (joining it if it has no row)."""

    def members_live(
        self, namespace: str, group: str, topic: str, heartbeat_since_ms: int
    ) -> list[str]:
        """Members whose last heartbeat is at or after ``heartbeat_since_ms``."""

    def member_remove(self, namespace: str, group: str, topic: str, member_id: str) -> None: ...

    def members_purge(
        self, namespace: str, group: str, topic: str, heartbeat_before_ms: int
    ) -> int:
        """Deletes the rows of members silent since before ``heartbeat_before_ms``."""

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
        """Sets ``group``'s next offset of ``partition`` if ``owner`` holds its lease with
        ``epoch`` (checked in the same statement, which on PostgreSQL holds the lease row
        until the transaction ends); False (nothing changed) otherwise."""

    def drop_group(self, namespace: str, group: str, topic: str) -> None:
        """Forgets ``group`` on ``topic`` in one transaction: offsets, leases, members."""
