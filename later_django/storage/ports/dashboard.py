"""The dashboard port: the dashboard's bounded reads.

``DashboardPort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from later_django.storage.dashboard import PartitionHeadRow, PartitionKey, PartitionLeaseRow
from later_django.storage.types import JobIndexWaitStats


@runtime_checkable
class DashboardPort(Protocol):
    """The dashboard's bounded reads: counters, depths, metric windows, partitions. Implemented
    by :class:`~later_django.storage.dashboard.DashboardReads`."""

    def stage_totals(self, namespace: str) -> dict[str, int]:
        """The ``later_stage_counts`` shards summed per stage (finished stages included); a sum
        may be below zero while counter updates are reordered."""

    def queue_depths(self, namespace: str) -> list[tuple[str, int]]:
        """``(queue name, ready messages)`` per queue, by name, from the
        ``later_queue_depth`` shards."""

    def oldest_ready_at_ms(self, namespace: str, queue_name: str, now_ms: int) -> int | None:
        """``available_at`` of the queue's first ready message in publish (sequence)
        order, whatever its priority (available and unclaimed or lease lapsed at
        ``now_ms``), or ``None``."""

    def transitions_between(
        self, namespace: str, first_bucket: int, last_bucket: int
    ) -> dict[str, int]:
        """Transitions per stage in the minute buckets ``first_bucket..last_bucket``."""

    def transitions_per_slot(
        self, namespace: str, stage: str, first_bucket: int, last_bucket: int, slot_minutes: int
    ) -> list[tuple[int, int, int]]:
        """Transitions into ``stage`` in the minute buckets ``first_bucket..last_bucket``,
        folded into slots of ``slot_minutes`` (slot = bucket // ``slot_minutes``):
        ``(slot, moves, moves of its busiest minute)`` per slot with moves, by slot;
        ``ValueError`` for ``slot_minutes`` below 1."""

    def waits_between(
        self, namespace: str, first_bucket: int, last_bucket: int
    ) -> dict[str, JobIndexWaitStats]:
        """Count, integer average and max wait per mode in the minute buckets
        ``first_bucket..last_bucket``; modes without samples are absent."""

    def topics(self, namespace: str) -> list[tuple[str, int]]:
        """``(topic, partition count)`` of the namespace's topics, by name."""

    def partition_heads(self, namespace: str, limit: int) -> dict[PartitionKey, PartitionHeadRow]:
        """The heads of at most ``limit`` partitions, in (topic, partition) order."""

    def partition_leases(self, namespace: str, limit: int) -> dict[PartitionKey, PartitionLeaseRow]:
        """The leases of at most ``limit`` partitions, in (topic, partition) order."""

    def partition_next_sequences(self, namespace: str, limit: int) -> dict[PartitionKey, int]:
        """The next sequence to allocate of at most ``limit`` partitions."""

    def log_partition_ends(self, namespace: str, limit: int) -> dict[PartitionKey, int]:
        """The next offset of at most ``limit`` retained-log partitions that ever had a
        record, in (topic, partition) order."""

    def consumer_offsets(self, namespace: str, limit: int) -> dict[tuple[str, str, int], int]:
        """``(group, topic, partition)`` → the group's next offset, for at most ``limit``
        offset rows, in (group, topic, partition) order."""

    def unclaimed_messages_published_between(
        self,
        namespace: str,
        queue_name: str,
        priority: int,
        published_from_ms: int,
        published_to_ms: int,
        limit: int,
    ) -> list[tuple[int, bytes]]:
        """``(sequence, payload)`` of at most ``limit`` unclaimed messages of one queue and
        priority available from ``published_from_ms`` to ``published_to_ms`` (inclusive),
        oldest first, through the claim index; payloads undecoded."""
