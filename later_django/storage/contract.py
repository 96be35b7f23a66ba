"""The storage contract: what every later_django storage must do, and what holds.

This is Later's ``Storage`` trait in Python. ``DjangoStorage``
(:mod:`later_django.storage.django`) implements it on a Django database
connection for SQLite and PostgreSQL; the conformance suite in
``tests/storage/`` runs against both.

Every method works on the connection of the storage's database alias. When
the caller is inside ``transaction.atomic()`` the writes join the caller's
transaction (so a job commits or rolls back with the caller's data); methods
that must be atomic on their own use a savepoint in that case.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from later_django.storage.types import (
    ClaimedMessage,
    Delete,
    Expire,
    JobIndexChange,
    JobIndexMetricsBatch,
    JobIndexPage,
    JobIndexRow,
    JobIndexWaitStats,
    QueueSample,
    RangeOrder,
    RangePage,
    Set,
    StorageOperation,
    WalCheckpoint,
)

#: Metric buckets older than this many minutes are swept.
METRIC_RETENTION_MINUTES = 5
#: Queue-length readings are kept one week.
QUEUE_SAMPLE_RETENTION_MINUTES = 7 * 24 * 60


class Storage(ABC):
    """Atomic key-value and ordered-range persistence, plus the dashboard index.

    Range members are unique byte strings with stable integer cursors. Expired
    values behave as absent everywhere. ``apply`` is atomic because one job
    transition can span several keys and ranges.
    """

    # --- key-value and ranges ---

    @abstractmethod
    def get(self, key: str) -> bytes | None:
        """The unexpired value of ``key``, or ``None`` when absent or expired."""

    @abstractmethod
    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The unexpired values of ``keys`` in one round trip; absent keys are left out."""

    @abstractmethod
    def apply(self, operations: Sequence[StorageOperation], *, savepoint: bool = True) -> None:
        """Applies every operation atomically: all become visible, or none do.

        Inside a caller's transaction it uses a savepoint, so a failure rolls back
        only this batch and the caller may go on. A caller that owns the
        transaction and would abandon it on any failure (the worker) passes
        ``savepoint=False`` to save the two round trips: a failure then marks the
        whole transaction for rollback, which is still all-or-nothing.
        """

    @abstractmethod
    def range_page(
        self,
        key: str,
        cursor: int | None = None,
        limit: int = 100,
        order: RangeOrder = RangeOrder.OLDEST_FIRST,
    ) -> RangePage:
        """At most ``limit`` unexpired members of range ``key`` in ``order``.

        ``cursor`` is exclusive and comes from a previous page, so the cost of a
        page does not grow with the size of the range. Members added after a
        page was read appear after it (oldest first) and never shift it.
        """

    @abstractmethod
    def range_members_many(self, keys: Sequence[str]) -> dict[str, list[bytes]]:
        """Every live member of each range in ``keys`` (oldest first), one statement;
        ranges with no live member are left out."""

    @abstractmethod
    def key_scan(self, start: str, stop: str, limit: int) -> list[str]:
        """Up to ``limit`` live keys in ``[start, stop)``, byte order; cost follows
        the keys returned."""

    @abstractmethod
    def range_count(self, key: str) -> int:
        """The number of unexpired members of range ``key`` (a plain read, never a write)."""

    def set(self, key: str, value: bytes) -> None:
        """Sets a value and clears any previous expiry."""
        self.apply([Set(key, value)])

    def delete(self, key: str) -> None:
        """Deletes a value; deleting an absent key succeeds."""
        self.apply([Delete(key)])

    def exist(self, key: str) -> bool:
        """Whether an unexpired value exists."""
        return self.get(key) is not None

    def expire(self, key: str, ttl_seconds: float) -> None:
        """Sets a time-to-live on an existing value; an absent key is not created."""
        self.apply([Expire(key, ttl_seconds)])

    @abstractmethod
    def set_if_absent(self, key: str, value: bytes, ttl_seconds: float | None = None) -> bool:
        """Creates ``key`` only if it has no unexpired value; ``True`` if this call created it.

        Atomic: of any number of concurrent callers for one key, exactly one
        gets ``True``. An expired value counts as absent and is replaced. With
        ``ttl_seconds`` the created value expires, which makes this a lease
        (e.g. "one process runs this maintenance pass").
        """

    # --- whole-database upkeep ---

    @abstractmethod
    def total_db_size_bytes(self) -> int | None:
        """On-disk size of the whole database (not only Later's tables), or ``None``."""

    @abstractmethod
    def sweep_expired(self, limit: int) -> int:
        """Deletes up to ``limit`` expired rows in total, across ``later_storage`` and
        ``later_storage_range``; returns how many.

        Bounded so that no call holds the write lock for long: loop until it
        returns less than ``limit`` to catch up.
        """

    @abstractmethod
    def checkpoint_wal_above(self, frames: int, truncate_wait_ms: int) -> WalCheckpoint:
        """Keeps SQLite's write-ahead log from growing without bound (``NOT_APPLICABLE``
        elsewhere): a passive checkpoint, then a truncating one that waits at most
        ``truncate_wait_ms`` for readers when the log holds ``frames`` frames or more.
        """

    @abstractmethod
    def vacuum(self) -> None:
        """Returns freed pages to the file system (SQLite ``VACUUM``; PostgreSQL relies on
        autovacuum and does nothing here)."""

    # --- the dashboard job index ---

    @abstractmethod
    def job_index_upsert(self, namespace: str, rows: Sequence[JobIndexRow]) -> None:
        """Inserts or updates each row; an update applies only when the incoming
        ``revision`` is at least the stored one. One statement for the batch."""

    @abstractmethod
    def job_index_remove(self, namespace: str, job_ids: Sequence[str]) -> None:
        """Deletes the index rows of ``job_ids`` (absent ones are ignored)."""

    @abstractmethod
    def apply_with_job_index(
        self,
        operations: Sequence[StorageOperation],
        namespace: str,
        changes: Sequence[JobIndexChange],
        *,
        savepoint: bool = True,
    ) -> None:
        """``apply`` and the index changes in one transaction (``savepoint`` as for
        ``apply``)."""

    @abstractmethod
    def job_index_stage_counts(self, namespace: str) -> dict[str, int]:
        """Live job count per stage, in O(1) reads; stages with no job are left out.

        Live stages come from the trigger-kept counters (``later_stage_counts``,
        and for ``enqueued`` also the delivery queue's depth); finished stages
        are counted from the index with the expiry filter (bounded by retention).
        A counter that dips below zero under reordering reads as absent.
        """

    @abstractmethod
    def job_index_reconcile_stage_counts(self, namespace: str) -> None:
        """Recounts every stage (finished ones: the index rows that exist, as the
        triggers count them) and queue depth, and replaces the counters, atomically."""

    @abstractmethod
    def job_index_list_by_stage(
        self, namespace: str, stage: str, cursor: str | None = None, limit: int = 50
    ) -> JobIndexPage:
        """A page of index rows in ``stage``, most recently transitioned first.

        ``cursor`` is opaque and exclusive, from a previous page. ``enqueued``
        lists the partitioned jobs' index rows only: the other queued jobs have
        none (the delivery queue's unclaimed messages answer for them).
        """

    @abstractmethod
    def job_index_list_by_partition(
        self,
        namespace: str,
        topic: str,
        partition_id: int,
        cursor: str | None = None,
        limit: int = 50,
    ) -> JobIndexPage:
        """A page of the jobs ever enqueued to one partition, highest sequence first."""

    @abstractmethod
    def job_index_partition_neighbor(
        self, namespace: str, topic: str, partition_id: int, sequence: int, older: bool
    ) -> JobIndexRow | None:
        """The job at ``sequence - 1`` (``older``) or ``sequence + 1`` in the partition."""

    @abstractmethod
    def job_index_list_continuations(
        self, namespace: str, parent_job_id: str, limit: int
    ) -> list[JobIndexRow]:
        """Up to ``limit`` jobs whose parent is ``parent_job_id``, oldest first."""

    @abstractmethod
    def job_index_get(self, namespace: str, job_id: str) -> JobIndexRow | None:
        """One job's index row (expired rows included), or ``None``."""

    # --- metrics ---

    @abstractmethod
    def job_index_record_metrics_batch(self, namespace: str, batch: JobIndexMetricsBatch) -> None:
        """Adds a pre-aggregated batch; one statement per metric table."""

    @abstractmethod
    def job_index_recent_transition_count(self, namespace: str, stage: str, now_ms: int) -> int:
        """Transitions into ``stage`` in the current and previous minute buckets."""

    @abstractmethod
    def job_index_recent_wait_stats(
        self, namespace: str, mode: str, now_ms: int
    ) -> JobIndexWaitStats:
        """Count, average and max wait for ``mode`` over the current and previous minutes."""

    @abstractmethod
    def job_index_sweep_expired(self, namespace: str, now_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` expired index rows, and metric buckets older than
        ``METRIC_RETENTION_MINUTES``; returns the number of index rows removed."""

    # --- queue-length history ---

    @abstractmethod
    def queue_sample_record(
        self, namespace: str, at_ms: int, queued: int, partitioned: int
    ) -> None:
        """Records the queue length for the minute containing ``at_ms`` (replacing an
        earlier reading of that minute) and trims readings older than a week."""

    @abstractmethod
    def queue_samples_since(self, namespace: str, since_ms: int) -> list[QueueSample]:
        """Readings from the minute containing ``since_ms`` on, oldest first."""

    @abstractmethod
    def purge_unused_dashboard_rows(self, namespace: str, limit: int) -> int:
        """Removes up to ``limit`` rows nothing reads any more; zero means none are left.

        Those are the range keys of earlier dashboards (``<ns>-all-jobs``,
        ``<ns>-stage-{enqueued,running,waiting}-jobs``, ``<ns>-stats-job-in-*``,
        ``<ns>-stats-partition-jobs-*``) and index rows of queued jobs that are
        not on a partition (the queue answers for those).
        """


class DeliveryQueue(ABC):
    """A leased message queue in SQL: publish, claim a batch, renew, ack, nack.

    Delivery is at-least-once: a claimed message whose lease lapses is claimed
    again. Claims take the highest ``priority`` first, then the oldest.
    """

    @abstractmethod
    def publish(
        self,
        namespace: str,
        queue_name: str,
        payloads: Sequence[bytes],
        priority: int = 0,
        available_at_ms: int | None = None,
    ) -> list[int]:
        """Inserts one message per payload (one statement) and returns their sequences.

        ``available_at_ms`` defaults to now; a later time defers the message.
        """

    @abstractmethod
    def claim(
        self,
        namespace: str,
        queue_names: Sequence[str],
        owner: str,
        lease_ms: int,
        batch_size: int = 16,
    ) -> list[ClaimedMessage]:
        """Leases ready messages to ``owner`` for ``lease_ms``, in claim order.

        Ready means due (``available_at`` passed) and not leased, or leased
        with a lapsed lease (reclaimed). When at least ``batch_size`` are ready
        it takes ``batch_size``; with fewer it takes one, so freshly started
        consumers share a small queue. Concurrent claimers never get the same
        message while its lease is current.
        """

    @abstractmethod
    def renew(self, owner: str, sequences: Sequence[int], lease_ms: int) -> list[int]:
        """Extends ``owner``'s leases; returns the sequences still held (others were lost)."""

    @abstractmethod
    def ack(self, owner: str, sequences: Sequence[int]) -> int:
        """Deletes ``owner``'s claimed messages; returns how many it still held."""

    @abstractmethod
    def nack(self, owner: str, sequences: Sequence[int], delay_ms: int = 0) -> int:
        """Hands ``owner``'s claimed messages back, ready again after ``delay_ms``."""

    @abstractmethod
    def depth(self, namespace: str, queue_name: str | None = None) -> int:
        """Ready (unclaimed) messages, from the trigger-kept counter (O(1))."""
