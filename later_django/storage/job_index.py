"""``JobIndexStore``: the dashboard's job index, its counters, metrics and queue samples.

One row per job in ``later_jobs_index`` (queued jobs that are not on a
partition have none: the delivery queue answers for them). Live-stage counts
come from the trigger-kept, striped ``later_stage_counts`` and
``later_queue_depth`` counters (readers sum the shards), so the stage panel
costs O(1) however many jobs there are; listings are keyset pages whose cost
is the page size. The triggers count the finished stages too (migration 0005):
the dashboard reads them there, while :meth:`JobIndexStore.job_index_stage_counts`
keeps the seed's answer (unexpired finished rows, counted from the index).

Every method runs on the connection of ``self.using``: inside the caller's
``transaction.atomic()`` its writes join the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction

from later_django.core import clock
from later_django.core.clock import MINUTE_MS, minute_bucket
from later_django.core.commands import ExecuteJob, decode_command
from later_django.exceptions import RecordDecodeError
from later_django.storage.contract import (
    METRIC_RETENTION_MINUTES,
    QUEUE_SAMPLE_RETENTION_MINUTES,
)
from later_django.storage.db import AliasBound, SqlRunner, as_bytes
from later_django.storage.sql.job_index import (
    QUEUE_DEPTH_LABEL,
    STATEMENTS,
)
from later_django.storage.types import (
    JobIndexChange,
    JobIndexMetricsBatch,
    JobIndexPage,
    JobIndexRemove,
    JobIndexRow,
    JobIndexUpsert,
    JobIndexWaitStats,
    QueueSample,
)

ENQUEUED = "enqueued"

#: Range keys (after ``<namespace>-``) that earlier dashboards kept and nothing reads.
DEAD_RANGE_KEYS: tuple[str, ...] = (
    "all-jobs",
    "stage-enqueued-jobs",
    "stage-running-jobs",
    "stage-waiting-jobs",
)
#: Range-key prefixes (after ``<namespace>-``) of earlier dashboards' bookkeeping.
DEAD_RANGE_PREFIXES: tuple[str, ...] = ("stats-job-in-", "stats-partition-jobs-")

# Cursor forms of ``job_index_list_by_stage``: "q:<sequence>" (in the delivery
# queue, before that message), "i" (the start of the index rows, after the
# queue), "i:<stage_date_ms>:<job_id>" (in the index rows, after that row).
_QUEUE_CURSOR = "q:"
_INDEX_CURSOR = "i"


def _row(values: Sequence[Any]) -> JobIndexRow:
    """A :class:`JobIndexRow` from the columns of ``ROW_COLUMNS``, in order."""
    return JobIndexRow(*values)


def _stage_cursor(row: JobIndexRow) -> str:
    return f"{_INDEX_CURSOR}:{row.stage_date_ms}:{row.job_id}"


def _parse_stage_cursor(cursor: str) -> tuple[int, str] | None:
    """``(stage_date_ms, job_id)`` of an index cursor; ``None`` for the start marker."""
    if cursor == _INDEX_CURSOR:
        return None
    prefix, _, rest = cursor.partition(":")
    date_text, separator, job_id = rest.partition(":")
    if prefix != _INDEX_CURSOR or not separator:
        raise ValueError(f"not a job-list cursor: {cursor!r}")
    try:
        return int(date_text), job_id
    except ValueError:
        raise ValueError(f"not a job-list cursor: {cursor!r}") from None


def _parse_queue_cursor(cursor: str) -> int:
    try:
        return int(cursor.removeprefix(_QUEUE_CURSOR))
    except ValueError:
        raise ValueError(f"not a job-list cursor: {cursor!r}") from None


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


class JobIndexStore(AliasBound):
    """The job-index part of ``DjangoStorage`` (see :class:`~.contract.Storage`)."""

    @property
    def _index_sql(self) -> SqlRunner:
        return SqlRunner(self.using, STATEMENTS)

    # --- writes ---

    def queue_backs_enqueued_stage(self) -> bool:
        """Always true: non-partitioned queued jobs are counted and listed from the queue."""
        return True

    def job_index_upsert(self, namespace: str, rows: Sequence[JobIndexRow]) -> None:
        """Inserts or updates each row; an update applies only when the incoming
        ``revision`` is at least the stored one (``wait_ms``, ``wait_mode`` and
        ``parent_job_id`` keep their stored value when the incoming one is null).

        One statement for the batch (SQLite splits a batch above its bound-variable
        limit, about 2,300 rows). A job given twice keeps its highest revision.
        """
        sql = self._index_sql
        if sql.vendor == "postgresql":
            part = self.job_index_upsert_part(namespace, rows)
            if part is not None:
                with sql.cursor() as cursor:
                    cursor.execute(*part)
            return
        unique = _newest_revision_per_job(rows)
        if unique:
            sql.execute_values("upsert", [[namespace, *self._row_values(row)] for row in unique])

    def job_index_upsert_part(
        self, namespace: str, rows: Sequence[JobIndexRow]
    ) -> tuple[str, list[Any]] | None:
        """PostgreSQL: the statement and parameters of ``job_index_upsert`` (one array
        per column: the rows transposed), or ``None`` when there is nothing to write."""
        unique = _newest_revision_per_job(rows)
        if not unique:
            return None
        columns = zip(*map(self._row_values, unique), strict=True)
        return self._index_sql.sql("upsert"), [namespace, *map(list, columns)]

    def job_index_remove_part(
        self, namespace: str, job_ids: Sequence[str]
    ) -> tuple[str, list[Any]] | None:
        """PostgreSQL: the statement and parameters of ``job_index_remove``."""
        unique = sorted(set(job_ids))
        if not unique:
            return None
        return self._index_sql.sql("remove"), [namespace, unique]

    def job_index_remove(self, namespace: str, job_ids: Sequence[str]) -> None:
        """Deletes the index rows of ``job_ids`` in one statement (absent ones are ignored)."""
        unique = sorted(set(job_ids))
        if not unique:
            return
        sql = self._index_sql
        sql.execute("remove", [namespace, sql.list_param(unique)])

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
        adds the ready depth of the namespace's job queues (``later_queue_depth``,
        internal ``__later*`` queues left out) to the counter of partitioned
        queued jobs. ``success``/``failed``: unexpired index rows. A part that sums
        to zero or less (a counter can dip under reordering) adds nothing; a stage
        with no job is absent.
        """
        rows = self._index_sql.fetch_all(
            "stage_counts", [namespace, namespace, namespace, clock.now_ms()]
        )
        counts: dict[str, int] = {}
        for label, total in rows:
            if total is None or int(total) <= 0:
                continue
            stage = ENQUEUED if label == QUEUE_DEPTH_LABEL else label
            counts[stage] = counts.get(stage, 0) + int(total)
        return counts

    def job_index_reconcile_stage_counts(self, namespace: str) -> None:
        """Replaces the namespace's stage counters and queue depths with recounts.

        One transaction (a savepoint inside the caller's): every stage is
        recounted from the index rows that exist, the finished ones included
        (expired rows the sweep has not deleted yet count, as for the triggers),
        queue depth from the unclaimed rows of the delivery queue per queue; the
        recounts land in shard 0 and every other shard is cleared.
        """
        sql = self._index_sql
        with transaction.atomic(using=self.using):
            sql.execute("reconcile_clear_stage_counts", [namespace])
            sql.execute("reconcile_recount_stages", [namespace])
            sql.execute("reconcile_clear_queue_depth", [namespace])
            sql.execute("reconcile_recount_queue_depth", [namespace])

    # --- listings ---

    def job_index_list_by_stage(
        self, namespace: str, stage: str, cursor: str | None = None, limit: int = 50
    ) -> JobIndexPage:
        """A page of at most ``limit`` jobs in ``stage``, most recently transitioned first.

        Index rows are ordered by ``(stage_date_ms, job_id)`` descending and paged
        by a keyset on both, so rows sharing a timestamp are neither skipped nor
        repeated; expired rows are left out. ``enqueued`` lists the delivery
        queue's unclaimed job messages of the namespace first (newest first by
        queue sequence; messages that are not jobs take a place in the page but
        are not listed), then the partitioned jobs' index rows. ``cursor`` is
        opaque and exclusive; ``next_cursor`` is ``None`` when nothing follows.
        """
        if limit < 1:
            return JobIndexPage(items=[], next_cursor=None)
        if stage != ENQUEUED:
            after = None if cursor is None else _parse_stage_cursor(cursor)
            items, more = self._stage_rows(namespace, stage, after, limit, partitioned=False)
            return JobIndexPage(items, _stage_cursor(items[-1]) if more else None)
        if cursor is not None and not cursor.startswith(_QUEUE_CURSOR):
            after = _parse_stage_cursor(cursor)
            items, more = self._stage_rows(namespace, stage, after, limit, partitioned=True)
            return JobIndexPage(items, _stage_cursor(items[-1]) if more else None)
        return self._list_enqueued_from_queue(
            namespace, None if cursor is None else _parse_queue_cursor(cursor), limit
        )

    def _list_enqueued_from_queue(
        self, namespace: str, before_sequence: int | None, limit: int
    ) -> JobIndexPage:
        """Queue messages before ``before_sequence``; once the queue is exhausted the
        page is filled with partitioned jobs' index rows."""
        sql = self._index_sql
        if before_sequence is None:
            queued = sql.fetch_all("list_queued_first", [namespace, limit + 1])
        else:
            queued = sql.fetch_all("list_queued_before", [namespace, before_sequence, limit + 1])
        page = queued[:limit]
        items = [row for row in map(self._queued_row, page) if row is not None]
        if len(queued) > limit:
            return JobIndexPage(items, f"{_QUEUE_CURSOR}{page[-1][0]}")
        # The queue is exhausted: the rest of the page comes from the index.
        index_rows, more = self._stage_rows(
            namespace, ENQUEUED, None, limit - len(items), partitioned=True
        )
        items.extend(index_rows)
        if not more:
            return JobIndexPage(items, None)
        return JobIndexPage(items, _stage_cursor(index_rows[-1]) if index_rows else _INDEX_CURSOR)

    @staticmethod
    def _queued_row(message: Sequence[Any]) -> JobIndexRow | None:
        """The index row of a queued job message, or ``None`` for any other message."""
        _sequence, payload, available_at = message
        try:
            command = decode_command(as_bytes(payload))
        except RecordDecodeError:
            return None
        if not isinstance(command, ExecuteJob):
            return None
        return JobIndexRow(
            job_id=command.job_id,
            payload_type=command.payload_type,
            stage=ENQUEUED,
            stage_date_ms=available_at,
            revision=0,
            created_at_ms=available_at,
        )

    def _stage_rows(
        self,
        namespace: str,
        stage: str,
        after: tuple[int, str] | None,
        limit: int,
        *,
        partitioned: bool,
    ) -> tuple[list[JobIndexRow], bool]:
        """Up to ``limit`` unexpired rows of ``stage`` after the key ``after``, and
        whether more follow (one extra row is read to know)."""
        prefix = "list_partitioned_enqueued" if partitioned else "list_by_stage"
        now = clock.now_ms()
        if after is None:
            rows = self._index_sql.fetch_all(f"{prefix}_first", [namespace, stage, now, limit + 1])
        else:
            date_ms, job_id = after
            rows = self._index_sql.fetch_all(
                f"{prefix}_after", [namespace, stage, date_ms, job_id, now, limit + 1]
            )
        return [_row(row) for row in rows[:limit]], len(rows) > limit

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
        sql = self._index_sql
        if cursor is None:
            rows = sql.fetch_all(
                "list_by_partition_first", [namespace, topic, partition_id, limit + 1]
            )
        else:
            rows = sql.fetch_all(
                "list_by_partition_after",
                [namespace, topic, partition_id, _parse_sequence_cursor(cursor), limit + 1],
            )
        items = [_row(row) for row in rows[:limit]]
        more = len(rows) > limit
        return JobIndexPage(items, str(items[-1].sequence) if more else None)

    def job_index_partition_neighbor(
        self, namespace: str, topic: str, partition_id: int, sequence: int, older: bool
    ) -> JobIndexRow | None:
        """The job at exactly ``sequence - 1`` (``older``) or ``sequence + 1``, or ``None``."""
        target = sequence - 1 if older else sequence + 1
        row = self._index_sql.fetch_one(
            "partition_neighbor", [namespace, topic, partition_id, target]
        )
        return None if row is None else _row(row)

    def job_index_list_continuations(
        self, namespace: str, parent_job_id: str, limit: int
    ) -> list[JobIndexRow]:
        """Up to ``limit`` jobs whose parent is ``parent_job_id``, oldest
        (``stage_date_ms``, then ``job_id``) first."""
        if limit < 1:
            return []
        rows = self._index_sql.fetch_all("list_continuations", [namespace, parent_job_id, limit])
        return [_row(row) for row in rows]

    def job_index_truncate_partition(
        self, namespace: str, topic: str, partition_id: int, keep_last: int
    ) -> int:
        """Deletes the partition's index rows beyond the ``keep_last`` highest
        sequences, in one statement; returns how many."""
        return self._index_sql.execute(
            "truncate_partition", [namespace, topic, partition_id, max(keep_last, 0)]
        )

    def job_index_get(self, namespace: str, job_id: str) -> JobIndexRow | None:
        """One job's index row (expired rows included), or ``None``."""
        row = self._index_sql.fetch_one("get", [namespace, job_id])
        return None if row is None else _row(row)

    # --- metrics ---

    def job_index_record_metrics_batch(self, namespace: str, batch: JobIndexMetricsBatch) -> None:
        """Adds a batch: samples of one key (stage or mode, minute bucket) are summed
        first (wait max is the max), then one upsert per metric table, atomically."""
        transitions: dict[tuple[str, int], int] = {}
        for stage, at_ms, count in batch.transitions:
            key = (stage, minute_bucket(at_ms))
            transitions[key] = transitions.get(key, 0) + count
        waits: dict[tuple[str, int], tuple[int, int, int]] = {}
        for mode, at_ms, count, sum_ms, max_ms in batch.waits:
            key = (mode, minute_bucket(at_ms))
            seen = waits.get(key, (0, 0, max_ms))
            waits[key] = (seen[0] + count, seen[1] + sum_ms, max(seen[2], max_ms))
        transition_rows = [(*key, transitions[key]) for key in sorted(transitions)]
        wait_rows = [(*key, *waits[key]) for key in sorted(waits)]
        if transition_rows and wait_rows:
            with transaction.atomic(using=self.using):
                self._record_metric_rows("record_transitions", namespace, transition_rows)
                self._record_metric_rows("record_waits", namespace, wait_rows)
        elif transition_rows:
            self._record_metric_rows("record_transitions", namespace, transition_rows)
        elif wait_rows:
            self._record_metric_rows("record_waits", namespace, wait_rows)

    def _record_metric_rows(
        self, name: str, namespace: str, rows: Sequence[tuple[Any, ...]]
    ) -> None:
        if self._index_sql.vendor == "postgresql":
            self._index_sql.execute(name, [namespace, *map(list, zip(*rows, strict=True))])
        else:
            self._index_sql.execute_values(name, [[namespace, *row] for row in rows])

    def _recent_buckets(self, now: int) -> tuple[int, int]:
        current = minute_bucket(now)
        return current - 1, current

    def job_index_recent_transition_count(self, namespace: str, stage: str, now_ms: int) -> int:
        """Transitions into ``stage`` in the minute bucket of ``now_ms`` and the one before."""
        row = self._index_sql.fetch_one(
            "recent_transition_count", [namespace, stage, *self._recent_buckets(now_ms)]
        )
        return int(row[0]) if row else 0

    def job_index_recent_wait_stats(
        self, namespace: str, mode: str, now_ms: int
    ) -> JobIndexWaitStats:
        """Count, integer average and max wait for ``mode`` over the minute bucket of
        ``now_ms`` and the one before; zeros when there was none."""
        row = self._index_sql.fetch_one(
            "recent_wait_stats", [namespace, mode, *self._recent_buckets(now_ms)]
        )
        count, sum_ms, max_ms = (int(value) for value in row) if row else (0, 0, 0)
        return JobIndexWaitStats(count=count, avg_ms=sum_ms // count if count else 0, max_ms=max_ms)

    def job_index_sweep_expired(self, namespace: str, now_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` index rows of the namespace expired at ``now_ms``
        (one bounded statement), and the metric buckets more than
        ``METRIC_RETENTION_MINUTES`` before it; returns the index rows removed."""
        sql = self._index_sql
        removed = sql.execute("sweep_index", [namespace, now_ms, limit]) if limit > 0 else 0
        stale_before = minute_bucket(now_ms) - METRIC_RETENTION_MINUTES
        sql.execute("sweep_transitions", [namespace, stale_before])
        sql.execute("sweep_waits", [namespace, stale_before])
        return removed

    # --- queue-length history ---

    def queue_sample_record(
        self, namespace: str, at_ms: int, queued: int, partitioned: int
    ) -> None:
        """Records the reading of the minute containing ``at_ms`` (replacing an earlier
        one of that minute) and trims readings older than
        ``QUEUE_SAMPLE_RETENTION_MINUTES``, in one transaction."""
        bucket = minute_bucket(at_ms)
        sql = self._index_sql
        with transaction.atomic(using=self.using):
            sql.execute("queue_sample_upsert", [namespace, bucket, queued, partitioned])
            sql.execute("queue_sample_trim", [namespace, bucket - QUEUE_SAMPLE_RETENTION_MINUTES])

    def queue_sample_counts(self, namespace: str) -> tuple[int, int]:
        """``(queued, partitioned)`` now, for a queue sample: the ready depth of the
        namespace's job queues (internal ``__later*`` queues left out) and the
        partitioned queued jobs (the ``enqueued`` counter); O(1), from the counters.
        A counter that dips below zero under reordering reads as 0."""
        row = self._index_sql.fetch_one("queue_sample_counts", [namespace, namespace])
        queued, partitioned = (int(value or 0) for value in row) if row else (0, 0)
        return max(queued, 0), max(partitioned, 0)

    def queue_samples_since(self, namespace: str, since_ms: int) -> list[QueueSample]:
        """Readings from the minute containing ``since_ms`` on, oldest first; ``at_ms``
        is the start of the reading's minute."""
        rows = self._index_sql.fetch_all(
            "queue_samples_since", [namespace, minute_bucket(since_ms)]
        )
        return [
            QueueSample(at_ms=bucket * MINUTE_MS, queued=queued, partitioned=partitioned)
            for bucket, queued, partitioned in rows
        ]

    # --- purge ---

    def purge_unused_dashboard_rows(self, namespace: str, limit: int) -> int:
        """Removes up to ``limit`` rows in total that nothing reads any more; returns
        how many (zero means none are left).

        In order: the range rows of ``<ns>-all-jobs`` and
        ``<ns>-stage-{enqueued,running,waiting}-jobs``, those whose key starts with
        ``<ns>-stats-job-in-`` or ``<ns>-stats-partition-jobs-`` (a half-open key
        range), then index rows of queued jobs not on a partition (the queue
        answers for those). Each delete is bounded by what is left of ``limit``.
        """
        sql = self._index_sql
        budget = max(limit, 0)
        removed = 0
        for suffix in DEAD_RANGE_KEYS:
            if budget == 0:
                return removed
            done = sql.execute("purge_range_exact", [f"{namespace}-{suffix}", budget])
            budget -= done
            removed += done
        for prefix in DEAD_RANGE_PREFIXES:
            if budget == 0:
                return removed
            start = f"{namespace}-{prefix}"
            end = start[:-1] + chr(ord(start[-1]) + 1)
            done = sql.execute("purge_range_prefix", [start, end, budget])
            budget -= done
            removed += done
        if budget > 0:
            removed += sql.execute("purge_queued_index_rows", [namespace, budget])
        return removed

    # --- helpers ---

    @staticmethod
    def _row_values(row: JobIndexRow) -> tuple[Any, ...]:
        """``row``'s values in the order of ``ROW_COLUMNS``."""
        return (
            row.job_id,
            row.payload_type,
            row.stage,
            row.stage_date_ms,
            row.revision,
            row.created_at_ms,
            row.wait_ms,
            row.wait_mode,
            row.topic,
            row.partition_id,
            row.sequence,
            row.parent_job_id,
            row.date_expire_ms,
        )
