"""``JobIndexStore``: the dashboard's job index and its counters (metric buckets and
queue samples: :mod:`later_django.storage.metrics`).

One row per job in ``later_jobs_index`` (queued jobs that are not on a
partition have none: the delivery queue answers for them, and
:meth:`JobIndexStore.queued_messages` hands its unclaimed rows, undecoded, to
the job list above storage). Live-stage counts come from the trigger-kept,
striped ``later_stage_counts`` and ``later_queue_depth`` counters (readers sum
the shards), so the stage panel costs O(1) however many jobs there are;
listings are keyset pages whose cost is the page size. The triggers count the
finished stages too (migration 0005): the dashboard reads them there, while
:meth:`JobIndexStore.job_index_stage_counts` keeps the seed's answer
(unexpired finished rows, counted from the index).

Every method runs on its driver's connection: inside the caller's
``transaction.atomic()`` its writes join the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from later_django.core import clock
from later_django.core.clock import minute_bucket
from later_django.core.keys import DEPENDENTS_SUFFIX, job_key_prefix
from later_django.core.stages import ENQUEUED
from later_django.storage.driver import Driver, as_bytes
from later_django.storage.job_filters import (
    FilteredIndexReads,
    _row,
    parse_stage_cursor,
    stage_cursor,
)
from later_django.storage.queries.index import QUEUE_DEPTH_LABEL, IndexQueries
from later_django.storage.types import (
    METRIC_RETENTION_MINUTES,
    JobIndexChange,
    JobIndexPage,
    JobIndexRemove,
    JobIndexRow,
    JobIndexUpsert,
)

#: Range keys (after ``<namespace>-``) that earlier dashboards kept and nothing reads.
DEAD_RANGE_KEYS: tuple[str, ...] = (
    "all-jobs",
    "stage-enqueued-jobs",
    "stage-running-jobs",
    "stage-waiting-jobs",
)
#: Range-key prefixes (after ``<namespace>-``) of earlier dashboards' bookkeeping.
DEAD_RANGE_PREFIXES: tuple[str, ...] = ("stats-job-in-", "stats-partition-jobs-")


@dataclass(frozen=True)
class QueuedMessage:
    """An unclaimed delivery-queue row of a job queue, as stored (``payload`` undecoded)."""

    sequence: int
    payload: bytes
    available_at_ms: int


def _parse_sequence_cursor(cursor: str) -> int:
    try:
        return int(cursor)
    except ValueError:
        raise ValueError(f"not a partition-list cursor: {cursor!r}") from None


def _newest_revision_per_job(rows: Iterable[JobIndexRow]) -> list[JobIndexRow]:
    """One row per job, the highest revision (the later one on a tie), in job-id order.

    PostgreSQL refuses an ``ON CONFLICT DO UPDATE`` that touches one row twice,
    and job-id order is the lock order that keeps concurrent batches from
    deadlocking.
    """
    newest: dict[str, JobIndexRow] = {}
    for row in rows:
        kept = newest.get(row.job_id)
        if kept is None or row.revision >= kept.revision:
            newest[row.job_id] = row
    return [newest[job_id] for job_id in sorted(newest)]


def _upsert_row(row: JobIndexRow) -> dict[str, Any]:
    """``row`` as the parameters of one row of ``IndexQueries.upsert``."""
    return {
        "job_id": row.job_id,
        "payload_type": row.payload_type,
        "stage": row.stage,
        "stage_date_ms": row.stage_date_ms,
        "revision": row.revision,
        "created_at_ms": row.created_at_ms,
        "wait_ms": row.wait_ms,
        "wait_mode": row.wait_mode,
        "topic": row.topic,
        "partition_id": row.partition_id,
        "sequence": row.sequence,
        "parent_job_id": row.parent_job_id,
        "date_expire": row.date_expire_ms,
        "queue_name": row.queue_name,
        "error_class": row.error_class,
    }


class JobIndexStore(FilteredIndexReads):
    """The job index on one driver's connection (see :class:`~.contract.Storage`)."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(IndexQueries)

    # --- writes ---

    def job_index_upsert(self, namespace: str, rows: Sequence[JobIndexRow]) -> None:
        """Inserts or updates each row; an update applies only when the incoming
        ``revision`` is at least the stored one (``wait_ms``, ``wait_mode`` and
        ``parent_job_id`` keep their stored value when the incoming one is null).

        One statement for the batch (SQLite splits a batch above its bound-variable
        limit, in one transaction). A job given twice keeps its highest revision.
        """
        unique = _newest_revision_per_job(rows)
        params = [_upsert_row(row) for row in unique]
        self._driver.execute_rows(self._q.upsert, params, {"namespace": namespace})

    def job_index_upsert_part(
        self, namespace: str, rows: Sequence[JobIndexRow]
    ) -> tuple[str, dict[str, Any]] | None:
        """The statement and named parameters of ``job_index_upsert`` as one part of a
        combined write, or ``None`` when there is nothing to write."""
        unique = _newest_revision_per_job(rows)
        if not unique:
            return None
        params = [_upsert_row(row) for row in unique]
        return self._driver.rows_part(self._q.upsert, params, {"namespace": namespace})

    def job_index_remove_part(
        self, namespace: str, job_ids: Sequence[str]
    ) -> tuple[str, dict[str, Any]] | None:
        """The statement and named parameters of ``job_index_remove`` as one part of a
        combined write, or ``None`` when there is nothing to remove."""
        unique = sorted(set(job_ids))
        if not unique:
            return None
        return self._q.remove, {
            "namespace": namespace,
            "job_ids": self._driver.list_param(unique),
        }

    def job_index_remove(self, namespace: str, job_ids: Sequence[str]) -> None:
        """Deletes the index rows of ``job_ids`` in one statement (absent ones are ignored)."""
        part = self.job_index_remove_part(namespace, job_ids)
        if part is not None:
            self._driver.execute(*part)

    def apply_index_changes(self, namespace: str, changes: Sequence[JobIndexChange]) -> None:
        """Applies ``changes`` as if one after another, in at most two statements.

        Every job with a remove is removed (first); the upserts that come after a
        job's last remove are then written in one batch. Call inside a
        transaction when the changes must commit with other writes.
        """
        removed: set[str] = set()
        upserts: dict[str, list[JobIndexRow]] = {}
        for change in changes:
            match change:
                case JobIndexRemove(job_id):
                    removed.add(job_id)
                    upserts.pop(job_id, None)
                case JobIndexUpsert(row):
                    upserts.setdefault(row.job_id, []).append(row)
                case _:
                    raise TypeError(f"not a job index change: {change!r}")
        if removed:
            self.job_index_remove(namespace, sorted(removed))
        if upserts:
            self.job_index_upsert(namespace, [row for rows in upserts.values() for row in rows])

    # --- counts ---

    def job_index_stage_counts(self, namespace: str) -> dict[str, int]:
        """Job count per stage, from one query whose parts are O(1) or bounded.

        Live stages: the ``later_stage_counts`` shards summed per stage. ``enqueued``
        adds the ready depth of the namespace's job queues (``later_queue_depth``)
        to the counter of partitioned
        queued jobs. ``success``/``failed``: unexpired index rows. A part that sums
        to zero or less (a counter can dip under reordering) adds nothing; a stage
        with no job is absent.
        """
        params = {"namespace": namespace, "now": clock.now_ms()}
        counts: dict[str, int] = {}
        for label, total in self._driver.fetch_all(self._q.stage_counts, params):
            if total is None or int(total) <= 0:
                continue
            stage = ENQUEUED if label == QUEUE_DEPTH_LABEL else label
            counts[stage] = counts.get(stage, 0) + int(total)
        return counts

    def job_index_reconcile_stage_counts(
        self, namespace: str, *, max_rows: int | None = None
    ) -> int:
        """Corrects the namespace's stage counters and queue depths to recounts;
        returns how many of the two counter tables it recounted.

        Exact beside concurrent writers, without locking them out: one statement
        per counter table recounts the rows (every index row that exists, the
        finished ones included, expired rows the sweep has not deleted yet too,
        as for the triggers; the unclaimed delivery rows per queue) and reads the
        counters in the same snapshot, then adds the difference to shard 0. What
        holds after: once the writers running meanwhile commit, every counter sum
        equals its recount. Writes nothing when nothing drifted. One transaction
        (a savepoint inside the caller's).

        A recount reads every row of the namespace in its table. With
        ``max_rows``, a table whose namespace holds more rows than that is left
        as it is (the triggers keep its counters: decision 115), found by reading at
        most ``max_rows + 1`` index entries, so the call reads at most about
        twice ``max_rows`` rows per table whatever the tables hold.
        """
        q, driver = self._q, self._driver
        params = {"namespace": namespace}
        recounted = 0
        with driver.index_walks_only():
            for probe, recount in (
                (q.reconcile_index_rows_within, q.reconcile_stage_counts),
                (q.reconcile_queue_rows_within, q.reconcile_queue_depth),
            ):
                if max_rows is not None:
                    row = driver.fetch_one(probe, {**params, "limit": max_rows + 1})
                    if row is None or int(row[0]) > max_rows:
                        continue
                driver.execute(recount, params)
                recounted += 1
        return recounted

    def job_index_list_by_stage(
        self, namespace: str, stage: str, cursor: str | None = None, limit: int = 50
    ) -> JobIndexPage:
        """A page of at most ``limit`` index rows in ``stage``, most recently
        transitioned first; the rows of ``enqueued`` are those of partitioned jobs
        only (the others have no index row: see :meth:`queued_messages`).

        Rows are ordered by ``(stage_date_ms, job_id)`` descending and paged by a
        keyset on both, so rows sharing a timestamp are neither skipped nor
        repeated; expired rows are left out. ``cursor`` is exclusive: ``None`` or
        ``"i"`` for the first page, else the ``next_cursor`` of the page before
        (``ValueError`` for another value); ``next_cursor`` is ``None`` when
        nothing follows.
        """
        if limit < 1:
            return JobIndexPage(items=[], next_cursor=None)
        after = None if cursor is None else parse_stage_cursor(cursor)
        items, more = self._stage_rows(namespace, stage, after, limit)
        return JobIndexPage(items, stage_cursor(items[-1]) if more else None)

    def _stage_rows(
        self, namespace: str, stage: str, after: tuple[int, str] | None, limit: int
    ) -> tuple[list[JobIndexRow], bool]:
        """Up to ``limit`` unexpired rows of ``stage`` after the key ``after``, and
        whether more follow (one extra row is read to know)."""
        q = self._q
        params: dict[str, Any] = {
            "namespace": namespace,
            "stage": stage,
            "now": clock.now_ms(),
            "limit": limit + 1,
        }
        if stage == ENQUEUED:
            first, following = q.list_partitioned_enqueued_first, q.list_partitioned_enqueued_after
        else:
            first, following = q.list_by_stage_first, q.list_by_stage_after
        if after is None:
            rows = self._driver.fetch_all(first, params)
        else:
            params["after_date_ms"], params["after_job_id"] = after
            rows = self._driver.fetch_all(following, params)
        return [_row(row) for row in rows[:limit]], len(rows) > limit

    def queued_messages(
        self, namespace: str, before_sequence: int | None, limit: int
    ) -> list[QueuedMessage]:
        """Up to ``limit`` unclaimed messages of the namespace's queues with a sequence
        below ``before_sequence`` (all when ``None``), newest first; one walk of the
        queue's primary key whose cost is ``limit``. Payloads are returned as stored, undecoded."""
        params: dict[str, Any] = {"namespace": namespace, "limit": limit}
        if before_sequence is None:
            rows = self._driver.fetch_all(self._q.list_queued_first, params)
        else:
            params["before"] = before_sequence
            rows = self._driver.fetch_all(self._q.list_queued_before, params)
        return [
            QueuedMessage(int(sequence), as_bytes(payload), int(available_at))
            for sequence, payload, available_at in rows
        ]

    def job_index_list_by_partition(
        self,
        namespace: str,
        topic: str,
        partition_id: int,
        cursor: str | None = None,
        limit: int = 50,
    ) -> JobIndexPage:
        """A page of the jobs ever enqueued to one partition, highest sequence first;
        the cursor is the last sequence shown (exclusive)."""
        if limit < 1:
            return JobIndexPage(items=[], next_cursor=None)
        params: dict[str, Any] = {
            "namespace": namespace,
            "topic": topic,
            "partition_id": partition_id,
            "limit": limit + 1,
        }
        if cursor is None:
            rows = self._driver.fetch_all(self._q.list_by_partition_first, params)
        else:
            params["before"] = _parse_sequence_cursor(cursor)
            rows = self._driver.fetch_all(self._q.list_by_partition_after, params)
        items = [_row(row) for row in rows[:limit]]
        more = len(rows) > limit
        return JobIndexPage(items, str(items[-1].sequence) if more else None)

    def job_index_partition_neighbor(
        self, namespace: str, topic: str, partition_id: int, sequence: int, older: bool
    ) -> JobIndexRow | None:
        """The job at exactly ``sequence - 1`` (``older``) or ``sequence + 1``, or ``None``."""
        params = {
            "namespace": namespace,
            "topic": topic,
            "partition_id": partition_id,
            "sequence": sequence - 1 if older else sequence + 1,
        }
        row = self._driver.fetch_one(self._q.partition_neighbor, params)
        return None if row is None else _row(row)

    def job_index_list_continuations(
        self, namespace: str, parent_job_id: str, limit: int
    ) -> list[JobIndexRow]:
        """Up to ``limit`` jobs whose parent is ``parent_job_id``, oldest
        (``stage_date_ms``, then ``job_id``) first."""
        if limit < 1:
            return []
        params = {"namespace": namespace, "parent_job_id": parent_job_id, "limit": limit}
        return [_row(row) for row in self._driver.fetch_all(self._q.list_continuations, params)]

    def job_index_get(self, namespace: str, job_id: str) -> JobIndexRow | None:
        """One job's index row (expired rows included), or ``None``."""
        row = self._driver.fetch_one(self._q.get, {"namespace": namespace, "job_id": job_id})
        return None if row is None else _row(row)

    # --- sweep ---

    def job_index_sweep_expired(self, namespace: str, now_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` index rows of the namespace expired at ``now_ms`` with
        their jobs' records (whose expiry is ``date_expire_unindexed``, the same time:
        see migration 0013), in one transaction of two bounded statements, and the
        metric buckets more than ``METRIC_RETENTION_MINUTES`` before it; returns the
        index rows removed. A job whose dependents counter exists
        (``core.keys.dependents_key``: children that have not finished, which may read
        its result) is skipped, however long ago it expired."""
        q, driver = self._q, self._driver
        removed = 0
        if limit > 0:
            params = {
                "namespace": namespace,
                "now": now_ms,
                "limit": limit,
                "held_prefix": job_key_prefix(namespace),
                "held_suffix": DEPENDENTS_SUFFIX,
            }
            with driver.atomic():
                job_ids = [job_id for (job_id,) in driver.fetch_all(q.sweep_index, params)]
                if job_ids:
                    prefix = job_key_prefix(namespace)
                    keys = driver.list_param([prefix + job_id for job_id in job_ids])
                    driver.execute(q.sweep_records, {"keys": keys})
            removed = len(job_ids)
        before_bucket = minute_bucket(now_ms) - METRIC_RETENTION_MINUTES
        stale = {"namespace": namespace, "before_bucket": before_bucket}
        driver.execute(q.sweep_transitions, stale)
        driver.execute(q.sweep_waits, stale)
        return removed

    # --- purge ---

    def purge_unused_dashboard_rows(self, namespace: str, limit: int) -> int:
        """Removes up to ``limit`` rows in total that nothing reads any more; returns
        how many (zero means none are left).

        In order: the range rows of ``<ns>-all-jobs`` and
        ``<ns>-stage-{enqueued,running,waiting}-jobs``, those whose key starts with
        ``<ns>-stats-job-in-`` or ``<ns>-stats-partition-jobs-`` (a half-open key
        range), then index rows of queued jobs not on a partition (the queue
        answers for those; found through their own partial index, migration 0017,
        not among the queued partitioned jobs' rows). Each delete is bounded by what
        is left of ``limit``.
        """
        q, driver = self._q, self._driver
        budget = max(limit, 0)
        removed = 0
        for suffix in DEAD_RANGE_KEYS:
            if budget == 0:
                return removed
            params = {"key": f"{namespace}-{suffix}", "limit": budget}
            done = driver.execute(q.purge_range_exact, params)
            budget -= done
            removed += done
        for prefix in DEAD_RANGE_PREFIXES:
            if budget == 0:
                return removed
            start = f"{namespace}-{prefix}"
            stop = start[:-1] + chr(ord(start[-1]) + 1)
            done = driver.execute(
                q.purge_range_prefix, {"start": start, "stop": stop, "limit": budget}
            )
            budget -= done
            removed += done
        if budget > 0:
            params = {"namespace": namespace, "limit": budget}
            with driver.index_walks_only():
                removed += driver.execute(q.purge_queued_index_rows, params)
        return removed
