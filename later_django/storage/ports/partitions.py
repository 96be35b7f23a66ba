"""The partition port: topic partitions' sequences, rows, heads and leases.

``PartitionPort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from later_django.storage.partitions import Fenced, HeadClaim, Partition, PartitionEntry
from later_django.storage.ports.leases import LeasePort


@runtime_checkable
class PartitionPort(Protocol):
    """Topic partitions: sequences, rows, heads, and the fenced partition leases. Implemented
    by :class:`~later_django.storage.partitions.PartitionStore`."""

    @property
    def leases(self) -> LeasePort:
        """The fenced partition leases (one lease table: ``later_partition_lease``)."""

    def allocate(
        self, namespace: str, requests: Sequence[tuple[str, int, int, int]]
    ) -> dict[Partition, int]:
        """For each ``(topic, partition_id, count, partitions)`` allocates ``count`` consecutive
        sequences and returns the first, by partition. Partitions whose topic is not
        registered with ``partitions`` are missing from the result (nothing is allocated for
        them)."""

    def enter(
        self, namespace: str, entries: Sequence[PartitionEntry], notify: str | None = None
    ) -> None:
        """Inserts the partition rows of ``entries`` and, for each partition without a head, its
        lowest new row as the head. ``notify``: the payload of the wake-up notification sent
        in the same statement (drivers that notify)."""

    def advance(
        self,
        namespace: str,
        partitions: Iterable[Partition],
        *,
        exits: Sequence[str] = (),
        run_at: dict[str, int] | None = None,
    ) -> None:
        """Deletes the rows of the jobs ``exits`` (finished), moves the earliest run time of the
        rows in ``run_at`` (retries), and sets the head of each of ``partitions`` to its
        lowest remaining row (with the stage of that job's index row and its earliest run
        time), or deletes the head when no row remains. One statement when batched; call
        inside the transaction that wrote the jobs' records and index rows."""

    def next_rows(
        self, namespace: str, partitions: Sequence[Partition], exits: Sequence[str], now_ms: int
    ) -> list[tuple[HeadClaim, int]]:
        """Each of ``partitions``' lowest row other than ``exits``, as a claim (epoch 0, stage
        from the job's index row, with its record) and its earliest run time: what becomes the
        head once ``exits`` leave. One statement when batched."""

    def take(
        self,
        namespace: str,
        owner: str,
        partitions: Iterable[Partition],
        lease_until_ms: int,
        now_ms: int,
    ) -> dict[Partition, int]:
        """``take(renew_own=True)`` of the partition leases: absent (epoch 1), released, lapsed
        or already ``owner``'s partitions become (or stay) its own; returns the epoch of each
        one ``owner`` now holds among those asked for."""

    def release(self, namespace: str, owner: str, partitions: Iterable[Partition]) -> None:
        """Gives up ``owner``'s leases on ``partitions`` (the next taker bumps the epoch)."""

    def fence(
        self, namespace: str, owner: str, held: Iterable[tuple[str, int, int]], lease_until_ms: int
    ) -> set[Partition]:
        """The partition leases' :meth:`~LeaseStore.renew` of ``(topic, partition_id, epoch)``
        triples: run as the first statement of a transaction that changes a head (its row
        locks keep the leases from being taken over until it ends)."""

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
        """:meth:`fence` and :meth:`next_rows` of the partitions fenced, and the live members
        of ``ranges`` (as ``range_members_many``), read after the fence in the caller's
        transaction (one statement when batched): the partitions still held at their epoch,
        their next rows, the members by range. On PostgreSQL, once a partition is kept, the
        rest of the caller's transaction runs its prepared statements with generic plans."""

    def materialize_heads(self, namespace: str, partitions: Iterable[Partition]) -> None:
        """Gives each of ``partitions`` that has rows but no head its lowest row as the head.
        Repairs the one race the head bookkeeping leaves: an enqueue that found the
        partition's head present just before the worker finishing that head saw the partition
        empty (its new row was not yet committed) and deleted it."""

    def claim_heads(
        self, namespace: str, owner: str, now_ms: int, exclude: Sequence[str], limit: int
    ) -> list[HeadClaim]:
        """Up to ``limit`` heads of partitions ``owner`` holds (lease current) that are runnable
        at ``now_ms`` (enqueued; delayed or requeued and due; or running, an attempt of a
        previous owner), leaving out the jobs ``exclude``, each with its job's record. Reads
        only (one statement)."""

    def runnable_head_exists(self, namespace: str, now_ms: int) -> bool:
        """Whether any partition's head is runnable now (enqueued, or delayed/requeued and
        due), whoever holds the partition; a ``running`` head is not (its holder may be
        alive: only a takeover finds out)."""
