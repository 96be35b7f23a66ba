"""``DashboardReads``: what the dashboard and ``later_status`` read beyond the index.

Counters (``later_stage_counts``, ``later_queue_depth``), the metric buckets of
a time window, the first ready message of a queue, the topic and partition
tables, and the bounded search of a queued job's delivery message. Each read
is O(1) or bounded (a small table, a ``LIMIT``, or a walk that stops at its
first match); none counts or scans ``later_jobs_index`` or
``later_delivery_queue``. Values come back as stored: clamping a counter
that dipped below zero, and composing figures, is the caller's
(:mod:`later_django.overview`).
"""

from __future__ import annotations

from dataclasses import dataclass

from later_django.storage.driver import Driver, as_bytes
from later_django.storage.queries.dashboard import DashboardQueries
from later_django.storage.types import JobIndexWaitStats

#: (topic, partition id)
PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class PartitionHeadRow:
    """A partition's head job (``later_partition_head``)."""

    sequence: int
    job_id: str
    earliest_run_at_ms: int
    stage: str


@dataclass(frozen=True)
class PartitionLeaseRow:
    """A partition's lease (``later_partition_lease``); ``owner`` is ``None`` once released."""

    owner: str | None
    lease_until_ms: int
    epoch: int


class DashboardReads:
    """The dashboard's reads on one driver's connection; each is one statement."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(DashboardQueries)

    def stage_totals(self, namespace: str) -> dict[str, int]:
        """The ``later_stage_counts`` shards summed per stage (finished stages
        included); a sum may be below zero while counter updates are reordered."""
        rows = self._driver.fetch_all(self._q.stage_counts, {"namespace": namespace})
        return {stage: int(total or 0) for stage, total in rows}

    def queue_depths(self, namespace: str) -> list[tuple[str, int]]:
        """``(queue name, ready messages)`` per queue, by name,
        from the ``later_queue_depth`` shards."""
        rows = self._driver.fetch_all(self._q.queue_depths, {"namespace": namespace})
        return [(queue_name, int(ready or 0)) for queue_name, ready in rows]

    def oldest_ready_at_ms(self, namespace: str, queue_name: str, now_ms: int) -> int | None:
        """``available_at`` of the queue's first ready message in publish (sequence)
        order, whatever its priority (available and unclaimed or lease lapsed at
        ``now_ms``), or ``None``."""
        params = {"namespace": namespace, "queue_name": queue_name, "now": now_ms}
        row = self._driver.fetch_one(self._q.oldest_ready, params)
        return None if row is None else int(row[0])

    def transitions_between(
        self, namespace: str, first_bucket: int, last_bucket: int
    ) -> dict[str, int]:
        """Transitions per stage in the minute buckets ``first_bucket..last_bucket``."""
        params = {"namespace": namespace, "first_bucket": first_bucket, "last_bucket": last_bucket}
        rows = self._driver.fetch_all(self._q.recent_transitions, params)
        return {stage: int(total or 0) for stage, total in rows}

    def transitions_per_slot(
        self, namespace: str, stage: str, first_bucket: int, last_bucket: int, slot_minutes: int
    ) -> list[tuple[int, int, int]]:
        """Transitions into ``stage`` in the minute buckets ``first_bucket..last_bucket``,
        folded into slots of ``slot_minutes`` (slot = bucket // ``slot_minutes``):
        ``(slot, moves, moves of its busiest minute)`` per slot with moves, by slot."""
        if slot_minutes < 1:
            raise ValueError(f"slot_minutes must be at least 1, got {slot_minutes}")
        params = {
            "namespace": namespace,
            "stage": stage,
            "first_bucket": first_bucket,
            "last_bucket": last_bucket,
            "slot_minutes": slot_minutes,
        }
        rows = self._driver.fetch_all(self._q.transitions_per_slot, params)
        return [(int(slot), int(total or 0), int(busiest or 0)) for slot, total, busiest in rows]

    def waits_between(
        self, namespace: str, first_bucket: int, last_bucket: int
    ) -> dict[str, JobIndexWaitStats]:
        """Count, integer average and max wait per mode in the minute buckets
        ``first_bucket..last_bucket``; modes without samples are absent."""
        params = {"namespace": namespace, "first_bucket": first_bucket, "last_bucket": last_bucket}
        waits = {}
        for mode, count, sum_ms, max_ms in self._driver.fetch_all(self._q.recent_waits, params):
            count = int(count or 0)
            waits[mode] = JobIndexWaitStats(
                count=count,
                avg_ms=int(sum_ms or 0) // count if count else 0,
                max_ms=int(max_ms or 0),
            )
        return waits

    def topics(self, namespace: str) -> list[tuple[str, int]]:
        """``(topic, partition count)`` of the namespace's topics, by name."""
        rows = self._driver.fetch_all(self._q.topics, {"namespace": namespace})
        return [(topic, int(partitions)) for topic, partitions in rows]

    def partition_heads(self, namespace: str, limit: int) -> dict[PartitionKey, PartitionHeadRow]:
        """The heads of at most ``limit`` partitions, in (topic, partition) order."""
        params = {"namespace": namespace, "limit": limit}
        return {
            (topic, int(partition_id)): PartitionHeadRow(int(sequence), job_id, int(run_at), stage)
            for topic, partition_id, sequence, job_id, run_at, stage in self._driver.fetch_all(
                self._q.partition_heads, params
            )
        }

    def partition_leases(self, namespace: str, limit: int) -> dict[PartitionKey, PartitionLeaseRow]:
        """The leases of at most ``limit`` partitions, in (topic, partition) order."""
        params = {"namespace": namespace, "limit": limit}
        return {
            (topic, int(partition_id)): PartitionLeaseRow(owner, int(until), int(epoch))
            for topic, partition_id, owner, until, epoch in self._driver.fetch_all(
                self._q.partition_leases, params
            )
        }

    def partition_next_sequences(self, namespace: str, limit: int) -> dict[PartitionKey, int]:
        """The next sequence to allocate of at most ``limit`` partitions."""
        params = {"namespace": namespace, "limit": limit}
        return {
            (topic, int(partition_id)): int(next_sequence)
            for topic, partition_id, next_sequence in self._driver.fetch_all(
                self._q.partition_sequences, params
            )
        }

    def log_partition_ends(self, namespace: str, limit: int) -> dict[PartitionKey, int]:
        """The next offset of at most ``limit`` retained-log partitions that ever had a
        record, in (topic, partition) order."""
        rows = self._driver.fetch_all(
            self._q.log_partition_ends, {"namespace": namespace, "limit": limit}
        )
        return {(topic, int(partition)): int(offset) for topic, partition, offset in rows}

    def consumer_offsets(self, namespace: str, limit: int) -> dict[tuple[str, str, int], int]:
        """``(group, topic, partition)`` → the group's next offset, for at most ``limit``
        offset rows, in (group, topic, partition) order."""
        rows = self._driver.fetch_all(
            self._q.consumer_offsets, {"namespace": namespace, "limit": limit}
        )
        return {
            (group, topic, int(partition)): int(offset) for group, topic, partition, offset in rows
        }

    def unclaimed_messages_published_between(
        self,
        namespace: str,
        queue_name: str,
        priority: int,
        published_from_ms: int,
        published_to_ms: int,
        limit: int,
    ) -> list[tuple[int, bytes]]:
        """``(sequence, payload)`` of at most ``limit`` unclaimed messages of one queue
        and priority available from ``published_from_ms`` to ``published_to_ms``
        (inclusive), oldest first, through the claim index; payloads undecoded."""
        params = {
            "namespace": namespace,
            "queue_name": queue_name,
            "priority": priority,
            "published_from": published_from_ms,
            "published_to": published_to_ms,
            "limit": limit,
        }
        rows = self._driver.fetch_all(self._q.unclaimed_messages_published_between, params)
        return [(int(sequence), as_bytes(payload)) for sequence, payload in rows]
