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
* A lease write names its owner: :meth:`fence` extends only leases whose owner
  *and* epoch still match, and returns which; a lease taken over from another
  owner (lapsed or released) gets the next epoch.

SQLite runs the per-partition statements inside one ``BEGIN IMMEDIATE``
transaction (the caller's, or one opened here).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from later_django.storage.db import AliasBound, SqlRunner, as_bytes
from later_django.storage.sql.partitions import PARTITION_SQL

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
class PartitionLease:
    topic: str
    partition_id: int
    owner: str | None
    lease_until_ms: int
    epoch: int


class PartitionStore(AliasBound):
    """Partition sequences, rows, heads and leases on the alias ``using``."""

    @property
    def _sql(self) -> SqlRunner:
        return SqlRunner(self.using, PARTITION_SQL)

    def _atomic(self):  # type: ignore[no-untyped-def]
        """SQLite: one transaction for a loop of statements (a savepoint inside the caller's)."""
        if self.connection.vendor == "postgresql":
            return nullcontext()
        return transaction.atomic(using=self.using)

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
        runner = self._sql
        ordered = sorted(requests)
        first: dict[Partition, int] = {}
        taken = {(topic, pid): count for topic, pid, count, _ in ordered}
        if runner.vendor == "postgresql":
            rows = runner.fetch_all(
                "sequence_allocate",
                [
                    [topic for topic, _, _, _ in ordered],
                    [pid for _, pid, _, _ in ordered],
                    [count for _, _, count, _ in ordered],
                    [partitions for _, _, _, partitions in ordered],
                    namespace,
                ],
            )
            for topic, pid, next_sequence in rows:
                first[(topic, pid)] = int(next_sequence) - taken[(topic, pid)]
            return first
        with self._atomic():
            for topic, pid, count, partitions in ordered:
                row = runner.fetch_one(
                    "sequence_allocate", [pid, count + 1, namespace, topic, partitions]
                )
                if row is not None:
                    first[(topic, pid)] = int(row[0]) - count
        return first

    def enter(
        self, namespace: str, entries: Sequence[PartitionEntry], notify: str | None = None
    ) -> None:
        """Inserts the partition rows of ``entries`` and, for each partition without a
        head, its lowest new row as the head. ``notify`` (PostgreSQL): the payload of
        the wake-up notification sent in the same statement."""
        if not entries:
            return
        runner = self._sql
        ordered = sorted(entries, key=lambda e: (e.topic, e.partition_id, e.sequence))
        if runner.vendor == "postgresql":
            params: list = [
                [e.topic for e in ordered],
                [e.partition_id for e in ordered],
                [e.sequence for e in ordered],
                [e.job_id for e in ordered],
                [e.earliest_run_at_ms for e in ordered],
                [e.stage for e in ordered],
                namespace,
                namespace,
            ]
            tail = "enter_tail"
            if notify is not None:
                tail = "enter_tail_notify"
                params.append(notify)
            with runner.cursor() as cursor:
                cursor.execute(runner.sql("enter") + runner.sql(tail), params)
            return
        with self._atomic():
            runner.execute_values(
                "jobs_insert",
                [
                    [namespace, e.topic, e.partition_id, e.sequence, e.job_id, e.earliest_run_at_ms]
                    for e in ordered
                ],
            )
            seen: set[Partition] = set()
            for e in ordered:
                if (e.topic, e.partition_id) in seen:
                    continue
                seen.add((e.topic, e.partition_id))
                runner.execute(
                    "head_insert_if_absent",
                    [
                        namespace,
                        e.topic,
                        e.partition_id,
                        e.sequence,
                        e.job_id,
                        e.earliest_run_at_ms,
                        e.stage,
                    ],
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
        remains. One statement on PostgreSQL; call inside the transaction that
        wrote the jobs' records and index rows."""
        affected = sorted(set(partitions))
        run_at = run_at or {}
        gone = sorted(set(exits))
        runner = self._sql
        if runner.vendor == "postgresql":
            if not affected and not gone and not run_at:
                return
            moved = sorted(run_at.items())
            moved_ids, moved_at = [job_id for job_id, _ in moved], [at for _, at in moved]
            runner.execute(
                "advance",
                [
                    [topic for topic, _ in affected],
                    [pid for _, pid in affected],
                    namespace,
                    gone,
                    moved_ids,
                    moved_at,
                    namespace,
                    namespace,
                    gone,
                    moved_ids,
                    moved_at,
                    namespace,
                    namespace,
                    namespace,
                ],
            )
            return
        with self._atomic():
            if gone:
                runner.execute("jobs_delete", [namespace, runner.list_param(gone)])
            for job_id, at in sorted(run_at.items()):
                runner.execute("job_run_at", [at, namespace, job_id])
            for topic, pid in affected:
                runner.execute("head_recompute", [namespace, namespace, topic, pid])
                runner.execute(
                    "head_delete_if_empty", [namespace, topic, pid, namespace, topic, pid]
                )

    def next_rows(
        self, namespace: str, partitions: Sequence[Partition], exits: Sequence[str], now_ms: int
    ) -> list[tuple[HeadClaim, int]]:
        """Each of ``partitions``' lowest row other than ``exits``, as a claim (epoch 0,
        stage from the job's index row, with its record) and its earliest run time:
        what becomes the head once ``exits`` leave. One statement on PostgreSQL."""
        if not partitions:
            return []
        runner = self._sql
        prefix = f"{namespace}-job-"
        if runner.vendor == "postgresql":
            rows = runner.fetch_all(
                "next_rows",
                [
                    [topic for topic, _ in partitions],
                    [pid for _, pid in partitions],
                    namespace,
                    sorted(set(exits)),
                    namespace,
                    prefix,
                    now_ms,
                ],
            )
        else:
            rows = []
            gone = runner.list_param(sorted(set(exits)))
            for topic, pid in partitions:
                row = runner.fetch_one(
                    "next_row", [namespace, prefix, now_ms, namespace, topic, pid, gone]
                )
                if row is not None:
                    rows.append(row)
        return [
            (HeadClaim(topic, int(pid), int(sequence), job_id, stage, 0, as_bytes(raw)), int(at))
            for topic, pid, sequence, job_id, stage, at, raw in rows
        ]

    def fence_and_next(
        self,
        namespace: str,
        owner: str,
        held: Iterable[tuple[str, int, int]],
        lease_until_ms: int,
        exits: Sequence[str],
        now_ms: int,
    ) -> tuple[set[Partition], list[tuple[HeadClaim, int]]]:
        """:meth:`fence` and :meth:`next_rows` of the partitions fenced, in one
        statement on PostgreSQL: the partitions still held at their epoch, and
        their next rows."""
        wanted = sorted(set(held))
        if not wanted:
            return set(), []
        runner = self._sql
        if runner.vendor != "postgresql":
            kept = self.fence(namespace, owner, wanted, lease_until_ms)
            return kept, self.next_rows(namespace, sorted(kept), exits, now_ms)
        rows = runner.fetch_all(
            "fence_and_next",
            [
                *_fence_params(wanted, lease_until_ms, namespace, owner),
                namespace,
                sorted(set(exits)),
                namespace,
                f"{namespace}-job-",
                now_ms,
            ],
        )
        kept = {(topic, int(pid)) for topic, pid, *_ in rows}
        following = [
            (HeadClaim(topic, int(pid), int(sequence), job_id, stage, 0, as_bytes(raw)), int(at))
            for topic, pid, sequence, job_id, stage, at, raw in rows
            if job_id is not None
        ]
        return kept, following

    def materialize_heads(self, namespace: str, partitions: Iterable[Partition]) -> None:
        """Gives each of ``partitions`` that has rows but no head its lowest row as the
        head. Repairs the one race the head bookkeeping leaves: an enqueue that found
        the partition's head present just before the worker finishing that head saw
        the partition empty (its new row was not yet committed) and deleted it."""
        affected = sorted(set(partitions))
        if not affected:
            return
        runner = self._sql
        if runner.vendor == "postgresql":
            runner.execute(
                "heads_materialize",
                [
                    namespace,
                    [topic for topic, _ in affected],
                    [pid for _, pid in affected],
                    namespace,
                    namespace,
                    namespace,
                ],
            )
            return
        with self._atomic():
            for topic, pid in affected:
                runner.execute(
                    "head_materialize",
                    [namespace, namespace, topic, pid, namespace, topic, pid],
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
        runner = self._sql
        rows = runner.fetch_all(
            "heads_claim",
            [
                f"{namespace}-job-",
                now_ms,
                namespace,
                owner,
                now_ms,
                now_ms,
                runner.list_param(sorted(exclude)),
                limit,
            ],
        )
        return [
            HeadClaim(topic, int(pid), int(sequence), job_id, stage, int(epoch), as_bytes(raw))
            for topic, pid, sequence, job_id, stage, epoch, raw in rows
        ]

    def runnable_head_exists(self, namespace: str, now_ms: int) -> bool:
        """Whether any partition's head is runnable now, whoever holds the partition."""
        return self._sql.fetch_one("runnable_head_exists", [namespace, now_ms]) is not None

    # --- leases ---

    def leases(self, namespace: str) -> dict[Partition, PartitionLease]:
        rows = self._sql.fetch_all("leases", [namespace])
        return {
            (topic, int(pid)): PartitionLease(topic, int(pid), owner, int(until), int(epoch))
            for topic, pid, owner, until, epoch in rows
        }

    def take(
        self,
        namespace: str,
        owner: str,
        partitions: Iterable[Partition],
        lease_until_ms: int,
        now_ms: int,
    ) -> dict[Partition, int]:
        """Takes or renews ``owner``'s lease on each of ``partitions`` it can have:
        absent (created at epoch 1), released (owner NULL), lapsed
        (``lease_until < now_ms``), or already its own. A lease taken from another
        owner, or a released one, gets the next epoch; renewing keeps it. Returns the
        epoch of every partition ``owner`` now holds among those asked for."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        runner = self._sql
        if runner.vendor == "postgresql":
            rows = runner.fetch_all(
                "lease_take",
                [
                    namespace,
                    owner,
                    lease_until_ms,
                    [topic for topic, _ in wanted],
                    [pid for _, pid in wanted],
                    now_ms,
                ],
            )
        else:
            rows = []
            with self._atomic():
                for topic, pid in wanted:
                    row = runner.fetch_one(
                        "lease_take", [namespace, topic, pid, owner, lease_until_ms, now_ms]
                    )
                    if row is not None:
                        rows.append(row)
        return {(topic, int(pid)): int(epoch) for topic, pid, epoch in rows}

    def release(self, namespace: str, owner: str, partitions: Iterable[Partition]) -> None:
        """Gives up ``owner``'s leases on ``partitions`` (the next taker bumps the epoch)."""
        wanted = sorted(set(partitions))
        if not wanted:
            return
        runner = self._sql
        if runner.vendor == "postgresql":
            runner.execute(
                "lease_release",
                [[topic for topic, _ in wanted], [pid for _, pid in wanted], namespace, owner],
            )
            return
        with self._atomic():
            for topic, pid in wanted:
                runner.execute("lease_release", [namespace, owner, topic, pid])

    def fence(
        self,
        namespace: str,
        owner: str,
        held: Iterable[tuple[str, int, int]],
        lease_until_ms: int,
    ) -> set[Partition]:
        """Extends ``owner``'s leases named by ``(topic, partition_id, epoch)`` whose
        owner and epoch still match; returns those partitions. Run as the first
        statement of a transaction that changes a head: the row lock it takes keeps
        the lease from being taken over until that transaction ends."""
        wanted = sorted(set(held))
        if not wanted:
            return set()
        runner = self._sql
        if runner.vendor == "postgresql":
            rows = runner.fetch_all(
                "lease_fence",
                _fence_params(wanted, lease_until_ms, namespace, owner),
            )
        else:
            rows = []
            for topic, pid, epoch in wanted:
                row = runner.fetch_one(
                    "lease_fence", [lease_until_ms, namespace, topic, pid, owner, epoch]
                )
                if row is not None:
                    rows.append(row)
        return {(topic, int(pid)) for topic, pid in rows}


def _fence_params(
    wanted: Sequence[tuple[str, int, int]], lease_until_ms: int, namespace: str, owner: str
) -> list[Any]:
    """PostgreSQL parameters of the lease fence: the new expiry, the held
    ``(topic, partition, epoch)`` triples as three arrays, namespace, owner."""
    return [
        lease_until_ms,
        [topic for topic, _, _ in wanted],
        [pid for _, pid, _ in wanted],
        [epoch for _, _, epoch in wanted],
        namespace,
        owner,
    ]
