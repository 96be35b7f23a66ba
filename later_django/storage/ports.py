"""The storage ports: what the engine, the worker and the surfaces may ask of storage.

One ``typing.Protocol`` per store. The ``Stores`` bundle (``storage.stores``) types
its members with these ports, so the code above storage depends on the ports and
not on a vendor or an implementation; mypy checks that each store satisfies its
port where ``stores_for`` builds the bundle, and ``tests/storage/test_ports.py``
runs every port's implementation on both drivers. The write batch's statement
parts (``*_part``) are not in the ports: only ``storage.batch`` combines them.

Contracts shared by every port: each method runs on the connection of the
bundle's alias and joins the caller's transaction when there is one (a write
commits or rolls back with the caller's data); a method documented as atomic
opens its own transaction (a savepoint inside the caller's); times are epoch
milliseconds; bad arguments raise ``ValueError``/``TypeError`` naming the value
before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from later_django.storage.dashboard import PartitionHeadRow, PartitionKey, PartitionLeaseRow
from later_django.storage.execution import RunningExecution
from later_django.storage.job_filters import FilteredIndexPort
from later_django.storage.job_index import QueuedMessage
from later_django.storage.leases import Lease, Slot
from later_django.storage.log import StoredRecord
from later_django.storage.partitions import Fenced, HeadClaim, Partition, PartitionEntry
from later_django.storage.types import (
    ClaimedMessage,
    ExecutionLease,
    FailureGroup,
    JobIndexChange,
    JobIndexMetricsBatch,
    JobIndexPage,
    JobIndexRow,
    JobIndexWaitStats,
    QueueAttempts,
    QueueSample,
    RangeOrder,
    RangePage,
    StorageOperation,
    TaskOutcomeSums,
    WalCheckpoint,
    WorkerRow,
)


@runtime_checkable
class KeyValuePort(Protocol):
    """Values with expiry and ordered ranges (``later_storage``, ``later_storage_range``).
    Implemented by :class:`~later_django.storage.kv.KeyValueStore`."""

    def get(self, key: str) -> bytes | None:
        """The unexpired value of ``key``, or ``None`` when absent, expired, or a counter-only
        row (one that ``Increment`` created and no ``Set`` gave a value)."""

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The unexpired values of ``keys`` in one statement; absent, expired and counter-only
        keys are left out."""

    def get_many_for_update(self, keys: Sequence[str]) -> dict[str, bytes]:
        """``get_many`` that also locks the rows until the transaction ends (PostgreSQL ``FOR
        UPDATE``, in key order; on SQLite the transaction already holds the database's write
        lock). Call it inside ``atomic()``."""

    def set(self, key: str, value: bytes) -> None:
        """Sets a value and clears any previous expiry."""

    def delete(self, key: str) -> None:
        """Deletes a value; deleting an absent key succeeds."""

    def exist(self, key: str) -> bool:
        """Whether an unexpired value exists."""

    def expire(self, key: str, ttl_seconds: float) -> None:
        """Sets a time-to-live on an existing value; an absent key is not created."""

    def apply(self, operations: Sequence[StorageOperation], *, savepoint: bool = True) -> None:
        """Applies ``operations`` in order, atomically: all become visible, or none do."""

    def range_page(
        self,
        key: str,
        cursor: int | None = None,
        limit: int = 100,
        order: RangeOrder = RangeOrder.OLDEST_FIRST,
    ) -> RangePage:
        """At most ``limit`` unexpired members of range ``key`` in ``order``."""

    def range_members_many(self, keys: Sequence[str]) -> dict[str, list[bytes]]:
        """The unexpired members of each range in ``keys``, oldest first, in one statement;
        ranges with no live member are left out."""

    def key_scan(self, start: str, stop: str, limit: int) -> list[str]:
        """Up to ``limit`` live keys ``k`` with ``start <= k < stop``, in byte order."""

    def range_count(self, key: str) -> int:
        """The number of unexpired members of range ``key``: a plain read that never takes the
        write lock (expired members are left to the sweep)."""

    def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl_seconds: float | None = None
    ) -> bool:
        """Replaces the live value of ``key`` by ``value`` only while it is ``expected``, in
        one statement; ``True`` if this call replaced it (of concurrent callers expecting
        the same value, exactly one). An absent or expired key is left absent."""

    def set_if_absent(self, key: str, value: bytes, ttl_seconds: float | None = None) -> bool:
        """Creates ``key`` with ``value`` only if it has no unexpired value; ``True`` if this
        call created it (an existing live value is left untouched)."""


@runtime_checkable
class JobIndexPort(FilteredIndexPort, Protocol):
    """The dashboard's index of jobs, its stage counters, metric buckets and queue samples.
    Implemented by :class:`~later_django.storage.job_index.JobIndexStore`."""

    def job_index_upsert(self, namespace: str, rows: Sequence[JobIndexRow]) -> None:
        """Inserts or updates each row; an update applies only when the incoming ``revision`` is
        at least the stored one (``wait_ms``, ``wait_mode`` and ``parent_job_id`` keep their
        stored value when the incoming one is null)."""

    def job_index_remove(self, namespace: str, job_ids: Sequence[str]) -> None:
        """Deletes the index rows of ``job_ids`` in one statement (absent ones are ignored)."""

    def apply_index_changes(self, namespace: str, changes: Sequence[JobIndexChange]) -> None:
        """Applies ``changes`` as if one after another, in at most two statements."""

    def job_index_stage_counts(self, namespace: str) -> dict[str, int]:
        """Job count per stage, from one query whose parts are O(1) or bounded."""

    def job_index_reconcile_stage_counts(
        self, namespace: str, *, max_rows: int | None = None
    ) -> int:
        """Corrects the namespace's stage counters and queue depths to recounts; exact
        beside concurrent writers once they commit, and no write when nothing drifted.
        With ``max_rows``, a table whose namespace holds more rows is not recounted
        (nor read beyond ``max_rows + 1`` entries). Returns the tables recounted (0-2)."""

    def job_index_list_by_stage(
        self, namespace: str, stage: str, cursor: str | None = None, limit: int = 50
    ) -> JobIndexPage:
        """A page of at most ``limit`` index rows in ``stage``, most recently transitioned first;
        the rows of ``enqueued`` are those of partitioned jobs only (the others have no index
        row: see :meth:`queued_messages`)."""

    def queued_messages(
        self, namespace: str, before_sequence: int | None, limit: int
    ) -> list[QueuedMessage]:
        """Up to ``limit`` unclaimed messages of the namespace's queues with a sequence below
        ``before_sequence`` (all when ``None``), newest first; one walk of the queue's
        primary key whose cost is ``limit``.
        Payloads are returned as stored, undecoded."""

    def job_index_list_by_partition(
        self,
        namespace: str,
        topic: str,
        partition_id: int,
        cursor: str | None = None,
        limit: int = 50,
    ) -> JobIndexPage:
        """A page of the jobs ever enqueued to one partition, highest sequence first; the cursor
        is the last sequence shown (exclusive)."""

    def job_index_partition_neighbor(
        self, namespace: str, topic: str, partition_id: int, sequence: int, older: bool
    ) -> JobIndexRow | None:
        """The job at exactly ``sequence - 1`` (``older``) or ``sequence + 1``, or ``None``."""

    def job_index_list_continuations(
        self, namespace: str, parent_job_id: str, limit: int
    ) -> list[JobIndexRow]:
        """Up to ``limit`` jobs whose parent is ``parent_job_id``, oldest (``stage_date_ms``,
        then ``job_id``) first."""

    def job_index_get(self, namespace: str, job_id: str) -> JobIndexRow | None:
        """One job's index row (expired rows included), or ``None``."""

    def job_index_sweep_expired(self, namespace: str, now_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` index rows of the namespace expired at ``now_ms`` (one bounded
        statement), and the metric buckets more than ``METRIC_RETENTION_MINUTES`` before it;
        returns the index rows removed."""

    def purge_unused_dashboard_rows(self, namespace: str, limit: int) -> int:
        """Removes up to ``limit`` rows in total that nothing reads any more; returns how many
        (zero means none are left)."""


@runtime_checkable
class UpkeepPort(Protocol):
    """Whole-database upkeep: size, bounded sweeps of expired rows, WAL checkpoint, vacuum.
    Implemented by :class:`~later_django.storage.upkeep.UpkeepStore`."""

    def total_db_size_bytes(self) -> int | None:
        """On-disk size of the whole database (not only Later's tables)."""

    def sweep_expired(self, limit: int) -> int:
        """Deletes up to ``limit`` expired rows in total, across ``later_storage`` and
        ``later_storage_range``; returns how many. Unexpired rows are never touched."""

    def checkpoint_wal_above(self, frames: int, truncate_wait_ms: int) -> WalCheckpoint:
        """A truncating checkpoint when SQLite's log holds at least ``frames`` frames."""

    def vacuum(self) -> None:
        """Returns freed pages to the file system."""


@runtime_checkable
class ExecutionPort(Protocol):
    """Execution leases of running jobs and the heartbeat rows of worker processes. Implemented
    by :class:`~later_django.storage.execution.ExecutionStore`."""

    def lease_acquire_many(
        self,
        namespace: str,
        owner: str,
        started_at_ms: int,
        leases: Sequence[tuple[str, int, int]],
    ) -> None:
        """Writes ``(job_id, lease_until_ms, attempt)`` leases for ``owner`` in one statement
        (SQLite: one per chunk of its bound-variable limit, in one transaction), replacing any
        earlier (lapsed) holder's row."""

    def lease_renew(
        self, namespace: str, owner: str, job_ids: Sequence[str], lease_until_ms: int
    ) -> list[str]:
        """Extends ``owner``'s leases; returns the job ids it still holds."""

    def lease_release_many(self, namespace: str, owner: str, job_ids: Sequence[str]) -> int:
        """Deletes ``owner``'s leases of ``job_ids``; returns how many it held."""

    def lease_get_many(self, namespace: str, job_ids: Sequence[str]) -> dict[str, ExecutionLease]:
        """The current lease rows of ``job_ids`` (lapsed ones included)."""

    def leases_of_owners(
        self, namespace: str, owners: Sequence[str], limit: int
    ) -> list[RunningExecution]:
        """The execution leases held by any of ``owners`` (worker ids), lapsed ones
        included, the oldest start first (then by job id), at most ``limit``; ``[]``
        without owners or for a ``limit`` below 1."""

    def worker_heartbeat(self, namespace: str, worker: WorkerRow) -> None:
        """Creates or refreshes the worker's row (``busy`` and ``heartbeat_at``)."""

    def worker_remove(self, namespace: str, worker_id: str) -> None:
        """Deletes the worker's row (a graceful exit)."""

    def worker_purge_dead(self, namespace: str, heartbeat_before_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` worker rows whose last heartbeat is before
        ``heartbeat_before_ms`` (one statement); returns how many. A live worker beats every
        third of its lease, so a cut-off far behind that is dead."""

    def lease_purge_dead(self, namespace: str, lapsed_before_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` execution leases that lapsed before ``lapsed_before_ms`` and
        whose job's index row is not ``running`` (the job finished, was retried or deleted:
        nothing reads the lease again); one statement; returns how many. A lease of a job
        still marked running is kept, because the next start of that job names the lost worker
        from it."""

    def workers_live(self, namespace: str, heartbeat_after_ms: int) -> list[WorkerRow]:
        """Workers whose last heartbeat is after ``heartbeat_after_ms``."""


@runtime_checkable
class QueuePort(Protocol):
    """The leased delivery queue: publish, claim a batch, renew, ack, hand back. Implemented by
    :class:`~later_django.storage.queue.SqlDeliveryQueue`."""

    @property
    def using(self) -> str:
        """The database alias of the queue's table."""

    def publish(
        self,
        namespace: str,
        queue_name: str,
        payloads: Sequence[bytes],
        priority: int = 0,
        available_at_ms: int | None = None,
        *,
        notify: str | None = None,
    ) -> list[int]:
        """Inserts one message per payload and returns their sequences, in payload order."""

    def claim(
        self,
        namespace: str,
        queue_names: Sequence[str] | None,
        owner: str,
        lease_ms: int,
        batch_size: int = 16,
    ) -> list[ClaimedMessage]:
        """Leases ready messages of ``queue_names`` to ``owner`` for ``lease_ms``; ``None``:
        of every queue of the namespace, whatever its name. Counts each message's
        delivery in the same statement (``ClaimedMessage.deliveries``)."""

    def has_ready(self, namespace: str, queue_names: Sequence[str] | None) -> bool:
        """Whether a claim of ``queue_names`` (``None``: every queue) would find a message now:
        a read that takes no write lock (idle SQLite workers ask this before they claim)."""

    def wake(self, namespace: str) -> None:
        """Wakes the idle workers of ``namespace`` when the caller's transaction commits
        (a notification where the driver has them; nothing where workers watch commits)."""

    def renew(self, owner: str, sequences: Sequence[int], lease_ms: int) -> list[int]:
        """Extends ``owner``'s leases to now + ``lease_ms``; returns the sequences it still held,
        ascending. A message acked, handed back or reclaimed by another owner is left alone
        (and left out). Raises ``ValueError`` for ``lease_ms`` ≤ 0."""

    def ack(self, owner: str, sequences: Sequence[int]) -> int:
        """Deletes the messages of ``sequences`` that ``owner`` still leases; returns how many.
        Acking a claimed row leaves the depth counter unchanged."""

    def delete_unclaimed(self, sequence: int) -> bool:
        """Deletes the message ``sequence`` if it carries no lease (never claimed, or
        handed back); ``True`` if it was deleted. A leased message is left alone, also
        when its lease has lapsed: the next claim takes it and drops it if its job is gone."""

    def nack(self, owner: str, sequences: Sequence[int], delay_ms: int = 0) -> int:
        """Hands the messages ``owner`` still leases back, ready again at now + ``delay_ms``,
        their claims' deliveries taken back; returns how many. Raises ``ValueError`` for
        a negative ``delay_ms``."""

    def depth(self, namespace: str, queue_name: str | None = None) -> int:
        """Ready (unleased) messages of ``queue_name``, or of every queue of ``namespace``
        when ``queue_name`` is ``None``."""


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


@runtime_checkable
class LeasePort(Protocol):
    """The one owner + epoch fenced lease, on one lease table. Implemented by
    :class:`~later_django.storage.leases.LeaseStore`."""

    def leases(self, scope: Sequence[Any]) -> dict[Slot, Lease]:
        """Every lease row of ``scope`` (lapsed and free ones included), by slot."""

    def take(
        self,
        scope: Sequence[Any],
        owner: Any,
        slots: Iterable[Slot],
        *,
        until_ms: int,
        now_ms: int,
        renew_own: bool = False,
    ) -> dict[Slot, int]:
        """Takes each of ``slots`` that is absent, free or lapsed at ``now_ms`` until
        ``until_ms`` (with ``renew_own`` also extends ``owner``'s own live ones, epoch kept);
        returns slot -> epoch of those now held (slot order, one write transaction)."""

    def renew(
        self,
        scope: Sequence[Any],
        owner: Any,
        held: Mapping[Slot, int],
        *,
        until_ms: int,
        now_ms: int = 0,
    ) -> set[Slot]:
        """Extends to ``until_ms`` each lease of ``held`` (slot -> epoch) that ``owner`` still
        holds at that epoch; returns those slots (the fence: see the module docstring).
        ``now_ms``: the write time of tables that record one."""

    def release(
        self,
        scope: Sequence[Any],
        owner: Any,
        slots: Iterable[Slot] | None = None,
        *,
        now_ms: int = 0,
    ) -> None:
        """Gives up ``owner``'s leases on ``slots`` (every one of the scope when None)."""

    def ensure(self, scope: Sequence[Any], slots: Sequence[Any]) -> None:
        """Creates free rows (epoch 0) for ``slots`` (one-column slot values) where missing."""

    def hold(
        self, scope: Sequence[Any], owner: Any, wanted: Sequence[Any], *, until_ms: int, now_ms: int
    ) -> dict[Any, int]:
        """In one statement: ``owner`` releases its leases outside ``wanted`` (one-column slot
        values), renews its own in it and takes those free or lapsed at ``now_ms`` (epoch + 1
        when the owner changes). Returns slot value -> epoch of what ``owner`` now holds."""


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


@runtime_checkable
class TopicPort(Protocol):
    """Each topic's fixed partition count in ``later_topic``, recorded once. Implemented by
    :class:`~later_django.storage.topics.TopicStore`."""

    def stored_partitions(self, namespace: str, topic: str) -> int | None:
        """The partition count recorded for ``topic`` in ``namespace``, or ``None``."""

    def record_if_absent(self, namespace: str, topic: str, partitions: int) -> int:
        """Records ``topic`` with ``partitions`` unless a count is recorded already; returns the
        count recorded after the call (``partitions``, or the one found)."""


@runtime_checkable
class MetricsPort(Protocol):
    """Minute buckets of stage transitions and waits, and the queue-length history. Implemented
    by :class:`~later_django.storage.metrics.MetricsStore`."""

    def record_batch(self, namespace: str, batch: JobIndexMetricsBatch) -> None:
        """Adds a batch: samples of one key (stage or mode, minute bucket; a task's minute key)
        are summed first (a max is the max), then one upsert per metric table that has rows,
        atomically."""

    def task_outcome_sums(
        self, namespace: str, first_bucket: int, last_bucket: int, task_path: str | None = None
    ) -> list[TaskOutcomeSums]:
        """The attempts of the minute buckets ``first_bucket`` … ``last_bucket`` summed per
        (task, outcome, duration bucket), of every task or of ``task_path`` only; one grouped
        read of the window's rows."""

    def queue_attempts(
        self, namespace: str, first_bucket: int, last_bucket: int
    ) -> list[QueueAttempts]:
        """The succeeded and the failing attempts of the minute buckets ``first_bucket`` …
        ``last_bucket`` per queue, by queue name; queues without either are absent. One
        grouped read of the window's rows."""

    def task_throughput(
        self,
        namespace: str,
        task_path: str,
        first_bucket: int,
        last_bucket: int,
        slot_minutes: int,
    ) -> list[tuple[int, str, int]]:
        """``(slot, outcome, attempts)`` of ``task_path`` in the window, slot = minute bucket
        // ``slot_minutes``, by slot then outcome; slots without attempts are absent."""

    def failure_groups(
        self,
        namespace: str,
        first_bucket: int,
        last_bucket: int,
        limit: int,
        task_path: str | None = None,
    ) -> list[FailureGroup]:
        """The failing attempts (retried, failed, timed out) of the window per (task, error
        class), the most first (then by task and class), at most ``limit`` groups, of every
        task or of ``task_path`` only; one grouped read of the window's rows."""

    def sweep_task_minutes(self, namespace: str, now_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` attempt rows of the namespace older than
        ``METRIC_RETENTION_MINUTES`` before ``now_ms`` (one bounded statement); returns how
        many."""

    def recent_transition_count(self, namespace: str, stage: str, now_ms: int) -> int:
        """Transitions into ``stage`` in the minute bucket of ``now_ms`` and the one before."""

    def recent_wait_stats(self, namespace: str, mode: str, now_ms: int) -> JobIndexWaitStats:
        """Count, integer average and max wait for ``mode`` over the minute bucket of ``now_ms``
        and the one before; zeros when there was none."""

    def record_queue_sample(
        self, namespace: str, at_ms: int, queued: int, partitioned: int
    ) -> None:
        """Records the reading of the minute containing ``at_ms`` (replacing an earlier one of
        that minute) and trims readings older than ``QUEUE_SAMPLE_RETENTION_MINUTES``, in one
        transaction."""

    def queue_sample_counts(self, namespace: str) -> tuple[int, int]:
        """``(queued, partitioned)`` now, for a queue sample: the ready depth of the namespace's
        queues and the partitioned queued jobs
        (the ``enqueued`` counter); O(1), from the counters. A counter that dips below zero
        under reordering reads as 0."""

    def queue_samples_since(self, namespace: str, since_ms: int) -> list[QueueSample]:
        """Readings from the minute containing ``since_ms`` on, oldest first; ``at_ms`` is the
        start of the reading's minute."""
