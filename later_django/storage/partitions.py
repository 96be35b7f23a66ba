"""Topic partitions on a Django connection: sequences, rows, heads, leases.

Contracts (the engine relies on them):

* :meth:`PartitionStore.allocate` hands out consecutive sequences per
  partition and validates the topic in the same statement: a partition whose
  topic is not registered with the given count gets nothing, and the caller
  decides why (:mod:`later_django.engine.partitions`).
* ``later_partition_head`` holds the lowest ``later_partition_job`` row of
  every partition that has rows. :meth:`enter` inserts a head only where none
  exists (an existing head is neither changed nor locked); :meth:`advance`
  sets each named head to its partition's lowest remaining row (stage from the
  job's index row) or deletes it when the partition is empty;
  :meth:`materialize_heads` repairs a head missing after a race between the
  two (see there).
* The partition leases are the one fenced lease (:mod:`later_django.storage.leases`
  on ``later_partition_lease``, scope ``(namespace,)``, slots ``(topic,
  partition_id)``): ``store.leases``. :meth:`fence` is its ``renew``.

Statements: :mod:`later_django.storage.queries.partitions`. Unbatched (SQLite)
statements run inside one ``BEGIN IMMEDIATE`` transaction (the caller's, or one
opened here). Job record keys are ``core.keys.job_key_prefix`` + job id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from later_django.core.keys import job_key_prefix
from later_django.storage.driver import Driver, as_bytes
from later_django.storage.kv import KeyValueStore, members_by_range
from later_django.storage.leases import LeaseStore
from later_django.storage.queries.leases import PARTITION_LEASES
from later_django.storage.queries.partitions import PartitionQueries
from later_django.storage.queries.queue import WAKE_CHANNEL

Partition = tuple[str, int]


@dataclass(frozen=True)
class PartitionEntry:
    """A job entering a partition at ``sequence`` (``stage``: its first stage)."""

    topic: str
    partition_id: int
    sequence: int
    job_id: str
    earliest_run_at_ms: int
    stage: str


@dataclass(frozen=True)
class HeadClaim:
    """A runnable head of a partition the claimer holds, under lease ``epoch``."""

    topic: str
    partition_id: int
    sequence: int
    job_id: str
    stage: str
    epoch: int
    #: The job's record (MessagePack), read with the claim; None when it is gone.
    record: bytes | None = None

    @property
    def partition(self) -> Partition:
        return (self.topic, self.partition_id)


@dataclass(frozen=True)
class Fenced:
    """What :meth:`PartitionStore.fence_and_next` read under the fence."""

    #: The partitions still held at the epoch asked for (their lease rows now locked).
    kept: set[Partition]
    #: Each kept partition's next row (a claim, epoch 0) and its earliest run time.
    following: list[tuple[HeadClaim, int]]
    #: The live members of each range asked for that has any, oldest first.
    members: dict[str, list[bytes]] = field(default_factory=dict)


class PartitionStore:
    """Partition sequences, rows, heads and leases on ``driver``'s database."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(PartitionQueries)
        #: The partition leases (scope ``(namespace,)``, slots ``(topic, partition_id)``).
        self.leases = LeaseStore(driver, PARTITION_LEASES)
        #: Where unbatched drivers read the ranges :meth:`fence_and_next` is asked for.
        self._kv = KeyValueStore(driver)

    # --- enqueue ---

    def allocate(
        self, namespace: str, requests: Sequence[tuple[str, int, int, int]]
    ) -> dict[Partition, int]:
        """For each ``(topic, partition_id, count, partitions)`` allocates ``count``
        consecutive sequences and returns the first, by partition. Partitions whose
        topic is not registered with ``partitions`` are missing from the result
        (nothing is allocated for them)."""
        if not requests:
            return {}
        ordered = sorted(requests)
        taken = {(topic, pid): count for topic, pid, count, _ in ordered}
        if self._q.batched:
            rows = self._driver.fetch_all(
                self._q.sequence_allocate,
                {
                    "topic": [topic for topic, _, _, _ in ordered],
                    "partition_id": [pid for _, pid, _, _ in ordered],
                    "taken": [count for _, _, count, _ in ordered],
                    "partitions": [partitions for _, _, _, partitions in ordered],
                    "namespace": namespace,
                },
            )
            return {(topic, pid): int(end) - taken[(topic, pid)] for topic, pid, end in rows}
        first: dict[Partition, int] = {}
        with self._driver.write_transaction():
            for topic, pid, count, partitions in ordered:
                row = self._driver.fetch_one(
                    self._q.sequence_allocate,
                    {
                        "partition_id": pid,
                        "taken": count,
                        "namespace": namespace,
                        "topic": topic,
                        "partitions": partitions,
                    },
                )
                if row is not None:
                    first[(topic, pid)] = int(row[0]) - count
        return first

    def enter(
        self, namespace: str, entries: Sequence[PartitionEntry], notify: str | None = None
    ) -> None:
        """Inserts the partition rows of ``entries`` and, for each partition without a
        head, its lowest new row as the head. ``notify``: the payload of the wake-up
        notification sent in the same statement (drivers that notify)."""
        if not entries:
            return
        ordered = sorted(entries, key=lambda e: (e.topic, e.partition_id, e.sequence))
        if self._q.batched:
            params: dict[str, Any] = {
                field: [getattr(e, field) for e in ordered]
                for field in ("topic", "partition_id", "sequence", "job_id", "stage")
            }
            params["earliest_run_at"] = [e.earliest_run_at_ms for e in ordered]
            params["namespace"] = namespace
            if notify is None:
                self._driver.execute(self._q.enter, params)
            else:
                wake = {"channel": WAKE_CHANNEL, "notify": notify}
                self._driver.execute(self._q.enter_notify, {**params, **wake})
            return
        with self._driver.write_transaction():
            self._driver.execute_rows(
                self._q.jobs_insert,
                [
                    {
                        "topic": e.topic,
                        "partition_id": e.partition_id,
                        "sequence": e.sequence,
                        "job_id": e.job_id,
                        "earliest_run_at": e.earliest_run_at_ms,
                    }
                    for e in ordered
                ],
                {"namespace": namespace},
            )
            seen: set[Partition] = set()
            for e in ordered:
                if (e.topic, e.partition_id) in seen:
                    continue
                seen.add((e.topic, e.partition_id))
                self._driver.execute(
                    self._q.head_insert_if_absent,
                    {
                        "namespace": namespace,
                        "topic": e.topic,
                        "partition_id": e.partition_id,
                        "sequence": e.sequence,
                        "job_id": e.job_id,
                        "earliest_run_at": e.earliest_run_at_ms,
                        "stage": e.stage,
                    },
                )

    # --- heads ---

    def advance(
        self,
        namespace: str,
        partitions: Iterable[Partition],
        *,
        exits: Sequence[str] = (),
        run_at: dict[str, int] | None = None,
    ) -> None:
        """Deletes the rows of the jobs ``exits`` (finished), moves the earliest run
        time of the rows in ``run_at`` (retries), and sets the head of each of
        ``partitions`` to its lowest remaining row (with the stage of that job's
        index row and its earliest run time), or deletes the head when no row
        remains. One statement when batched; call inside the transaction that
        wrote the jobs' records and index rows."""
        affected = sorted(set(partitions))
        moved = sorted((run_at or {}).items())
        gone = sorted(set(exits))
        if self._q.batched:
            if not affected and not gone and not moved:
                return
            self._driver.execute(
                self._q.advance,
                {
                    **_columns(affected),
                    "namespace": namespace,
                    "exits": gone,
                    "moved": [job_id for job_id, _ in moved],
                    "moved_at": [at for _, at in moved],
                },
            )
            return
        with self._driver.write_transaction():
            if gone:
                self._driver.execute(
                    self._q.jobs_delete,
                    {"namespace": namespace, "exits": self._driver.list_param(gone)},
                )
            for job_id, at in moved:
                self._driver.execute(
                    self._q.job_run_at, {"at": at, "namespace": namespace, "job_id": job_id}
                )
            if affected:
                where = {"namespace": namespace, "partitions": self._driver.list_param(affected)}
                self._driver.execute(self._q.head_recompute, where)
                self._driver.execute(self._q.head_delete_if_empty, where)

    def next_rows(
        self, namespace: str, partitions: Sequence[Partition], exits: Sequence[str], now_ms: int
    ) -> list[tuple[HeadClaim, int]]:
        """Each of ``partitions``' lowest row other than ``exits``, as a claim (epoch 0,
        stage from the job's index row, with its record) and its earliest run time:
        what becomes the head once ``exits`` leave. One statement."""
        if not partitions:
            return []
        gone = sorted(set(exits))
        params = {"namespace": namespace, "prefix": job_key_prefix(namespace), "now": now_ms}
        if self._q.batched:
            rows = self._driver.fetch_all(
                self._q.next_rows, {**params, **_columns(partitions), "exits": gone}
            )
        else:
            params["exits"] = self._driver.list_param(gone)
            params["partitions"] = self._driver.list_param(list(partitions))
            rows = self._driver.fetch_all(self._q.next_rows, params)
        return [_following(row) for row in rows]

    # --- leases: the partition spelling of the one lease (self.leases) ---

    def take(
        self,
        namespace: str,
        owner: str,
        partitions: Iterable[Partition],
        lease_until_ms: int,
        now_ms: int,
    ) -> dict[Partition, int]:
        """``take(renew_own=True)`` of the partition leases: absent (epoch 1), released,
        lapsed or already ``owner``'s partitions become (or stay) its own; returns
        the epoch of each one ``owner`` now holds among those asked for."""
        return self.leases.take(
            (namespace,), owner, partitions, until_ms=lease_until_ms, now_ms=now_ms, renew_own=True
        )

    def release(self, namespace: str, owner: str, partitions: Iterable[Partition]) -> None:
        """Gives up ``owner``'s leases on ``partitions`` (the next taker bumps the epoch)."""
        self.leases.release((namespace,), owner, partitions)

    def fence(
        self, namespace: str, owner: str, held: Iterable[tuple[str, int, int]], lease_until_ms: int
    ) -> set[Partition]:
        """The partition leases' :meth:`~LeaseStore.renew` of ``(topic, partition_id,
        epoch)`` triples: run as the first statement of a transaction that changes a
        head (its row locks keep the leases from being taken over until it ends)."""
        return self.leases.renew(
            (namespace,),
            owner,
            {(topic, pid): epoch for topic, pid, epoch in held},
            until_ms=lease_until_ms,
        )

    def fence_and_next(
        self,
        namespace: str,
        owner: str,
        held: Iterable[tuple[str, int, int]],
        lease_until_ms: int,
        exits: Sequence[str],
        now_ms: int,
        *,
        ranges: Sequence[str] = (),
    ) -> Fenced:
        """:meth:`fence` and :meth:`next_rows` of the partitions fenced, and the live
        members of ``ranges`` (those :meth:`KeyValueStore.range_members_many` would
        return): one statement when batched, so a finish reads its jobs'
        continuations without a round trip of its own. The members are read after
        the fence, within the caller's transaction: a range written by a
        transaction that committed before this statement began is seen.

        PostgreSQL: when a partition is kept, the rest of the caller's transaction
        runs its prepared statements with generic plans (``plan_cache_mode``, set
        locally, as ``SET LOCAL``). The finish's :meth:`advance` follows: its
        generic plan is costed for arrays of 10 and a finish passes fewer, so the
        server otherwise chose a custom plan at every run, planning ~1 ms each time
        (more than it then ran); the plans are the same (index probes by job id and
        by partition)."""
        wanted = sorted(set(held))
        if not wanted and not ranges:
            return Fenced(set(), [])
        if not self._q.batched:
            kept = self.fence(namespace, owner, wanted, lease_until_ms)
            following = self.next_rows(namespace, sorted(kept), exits, now_ms)
            return Fenced(kept, following, self._kv.range_members_many(ranges))
        rows = self._driver.fetch_all(
            self._q.fence_and_next,
            {
                "until": lease_until_ms,
                "topic": [topic for topic, _, _ in wanted],
                "partition_id": [pid for _, pid, _ in wanted],
                "epoch": [epoch for _, _, epoch in wanted],
                "namespace": namespace,
                "owner": owner,
                "exits": sorted(set(exits)),
                "prefix": job_key_prefix(namespace),
                "now": now_ms,
                "ranges": sorted(set(ranges)),
            },
        )
        # A range member's row has no partition id (see the statement).
        fenced = [row for row in rows if row[1] is not None]
        return Fenced(
            {(topic, int(pid)) for topic, pid, *_ in fenced},
            [_following(row[:7]) for row in fenced if row[3] is not None],
            members_by_range((row[0], row[6]) for row in rows if row[1] is None),
        )

    def materialize_heads(self, namespace: str, partitions: Iterable[Partition]) -> None:
        """Gives each of ``partitions`` that has rows but no head its lowest row as the
        head. Repairs the one race the head bookkeeping leaves: an enqueue that found
        the partition's head present just before the worker finishing that head saw
        the partition empty (its new row was not yet committed) and deleted it."""
        affected = sorted(set(partitions))
        if not affected:
            return
        if self._q.batched:
            self._driver.execute(
                self._q.heads_materialize, {"namespace": namespace, **_columns(affected)}
            )
            return
        with self._driver.write_transaction():
            for topic, pid in affected:
                self._driver.execute(
                    self._q.heads_materialize,
                    {"namespace": namespace, "topic": topic, "partition_id": pid},
                )

    def claim_heads(
        self, namespace: str, owner: str, now_ms: int, exclude: Sequence[str], limit: int
    ) -> list[HeadClaim]:
        """Up to ``limit`` heads of partitions ``owner`` holds (lease current) that are
        runnable at ``now_ms`` (enqueued; delayed or requeued and due; or running, an
        attempt of a previous owner), leaving out the jobs ``exclude``, each with its
        job's record. Reads only (one statement)."""
        if limit <= 0:
            return []
        rows = self._driver.fetch_all(
            self._q.heads_claim,
            {
                "prefix": job_key_prefix(namespace),
                "now": now_ms,
                "namespace": namespace,
                "owner": owner,
                "exclude": self._driver.list_param(sorted(exclude)),
                "limit": limit,
            },
        )
        return [
            HeadClaim(topic, int(pid), int(sequence), job_id, stage, int(epoch), as_bytes(raw))
            for topic, pid, sequence, job_id, stage, epoch, raw in rows
        ]

    def runnable_head_exists(self, namespace: str, now_ms: int) -> bool:
        """Whether any partition's head is runnable now (enqueued, or delayed/requeued and
        due), whoever holds the partition; a ``running`` head is not (its holder may be
        alive: only a takeover finds out)."""
        row = self._driver.fetch_one(
            self._q.runnable_head_exists, {"namespace": namespace, "now": now_ms}
        )
        return row is not None


def _columns(partitions: Sequence[Partition]) -> dict[str, list[Any]]:
    """``partitions`` as the two arrays of a batched statement."""
    return {
        "topic": [topic for topic, _ in partitions],
        "partition_id": [pid for _, pid in partitions],
    }


def _following(row: Sequence[Any]) -> tuple[HeadClaim, int]:
    """A next-row result as a claim (epoch 0) and its earliest run time."""
    topic, pid, sequence, job_id, stage, at, raw = row
    return HeadClaim(topic, int(pid), int(sequence), job_id, stage, 0, as_bytes(raw)), int(at)
