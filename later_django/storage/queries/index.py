"""Statements of the dashboard job index (``later_jobs_index``), its counters
(``later_stage_counts``, ``later_queue_depth``), metrics and queue samples.

The stage lists are the code constants of :mod:`later_django.core.stages`,
written into the text once at import (fixed text, never values).
"""

from __future__ import annotations

import functools

from later_django.core.stages import FINISHED_STAGES, LIVE_STAGES
from later_django.storage.driver import RowsStatement


def _sql_list(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{name}'" for name in names)


#: ``'delayed', 'waiting', 'enqueued', 'running', 'requeued'``
LIVE_STAGE_LIST = _sql_list(LIVE_STAGES)
#: ``'success', 'failed'``
FINISHED_STAGE_LIST = _sql_list(FINISHED_STAGES)
#: Every stage: what the ``later_stage_counts`` triggers count (migration 0005).
COUNTED_STAGE_LIST = _sql_list(LIVE_STAGES + FINISHED_STAGES)

#: The columns of an index row, in the order of :class:`JobIndexRow`'s fields.
ROW_COLUMNS = (
    "job_id, payload_type, stage, stage_date_ms, revision, created_at_ms, wait_ms, "
    "wait_mode, topic, partition_id, sequence, parent_job_id, date_expire, queue_name,"
    " error_class"
)
#: The row parameters of ``upsert``: one per column, named as the column.
ROW_FIELDS = tuple(name.strip() for name in ROW_COLUMNS.split(","))

#: The label of the queue-depth part of ``stage_counts`` (not a stage name).
QUEUE_DEPTH_LABEL = "__queue_depth"

UPSERT_INTO = f"INSERT INTO later_jobs_index (namespace, {ROW_COLUMNS})"
UPSERT_CONFLICT = (
    " ON CONFLICT (namespace, job_id) DO UPDATE SET"
    " payload_type = excluded.payload_type,"
    " stage = excluded.stage,"
    " stage_date_ms = excluded.stage_date_ms,"
    " revision = excluded.revision,"
    " wait_ms = COALESCE(excluded.wait_ms, later_jobs_index.wait_ms),"
    " wait_mode = COALESCE(excluded.wait_mode, later_jobs_index.wait_mode),"
    " topic = excluded.topic,"
    " partition_id = excluded.partition_id,"
    " sequence = excluded.sequence,"
    " parent_job_id = COALESCE(excluded.parent_job_id, later_jobs_index.parent_job_id),"
    " date_expire = excluded.date_expire,"
    " queue_name = excluded.queue_name,"
    " error_class = excluded.error_class"
    " WHERE excluded.revision >= later_jobs_index.revision"
)
TRANSITIONS_INTO = (
    "INSERT INTO later_job_transition_metrics (namespace, stage, minute_bucket, count)"
)
TRANSITIONS_CONFLICT = (
    " ON CONFLICT (namespace, stage, minute_bucket) DO UPDATE SET"
    " count = later_job_transition_metrics.count + excluded.count"
)
WAITS_INTO = (
    "INSERT INTO later_job_wait_metrics (namespace, mode, minute_bucket, count, sum_ms, max_ms)"
)


def waits_conflict(greatest: str) -> str:
    """The wait-metrics upsert's conflict clause with the vendor's ``greatest`` function."""
    return (
        " ON CONFLICT (namespace, mode, minute_bucket) DO UPDATE SET"
        " count = later_job_wait_metrics.count + excluded.count,"
        " sum_ms = later_job_wait_metrics.sum_ms + excluded.sum_ms,"
        f" max_ms = {greatest}(later_job_wait_metrics.max_ms, excluded.max_ms)"
    )


def queued_messages(table: str, *, before: bool) -> str:
    """The unclaimed job-queue messages of a namespace, newest first; ``table`` is
    the table as the vendor names it for this walk (with its index hint)."""
    return (
        f"SELECT sequence, payload, available_at FROM {table}"
        " WHERE namespace = %(namespace)s AND lease_until IS NULL"
        + (" AND sequence < %(before)s" if before else "")
        + " ORDER BY sequence DESC LIMIT %(limit)s"
    )


_LIST_BY_STAGE = (
    f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
    " WHERE namespace = %(namespace)s AND stage = %(stage)s{after}{partitioned}"
    " AND (date_expire IS NULL OR date_expire > %(now)s)"
    " ORDER BY stage_date_ms DESC, job_id DESC LIMIT %(limit)s"
)
#: Rows behind the keyset cursor ``(after_date_ms, after_job_id)`` in the list's order.
AFTER_STAGE_KEY = "(stage_date_ms, job_id) < (%(after_date_ms)s, %(after_job_id)s)"
#: The same rows with the row value spelled out: MariaDB reads a row-value comparison
#: as no index range (every row before the cursor is read, then filtered). Written as
#: a range of ``stage_date_ms`` and the tie-break as a filter: with the ``OR`` of the
#: two bounds at the top, MariaDB merged a filter index with the primary key (its
#: ``job_id`` range) and sorted the rows.
AFTER_STAGE_KEY_EXPANDED = (
    "stage_date_ms <= %(after_date_ms)s"
    " AND (stage_date_ms < %(after_date_ms)s OR job_id < %(after_job_id)s)"
)
_AFTER_STAGE_KEY = " AND " + AFTER_STAGE_KEY
_PARTITIONED = " AND topic IS NOT NULL"


def list_by_stage(after_key: str = "", *, partitioned: bool = False) -> str:
    """A stage list's page: behind the keyset term ``after_key`` when one is given,
    only rows on a partition with ``partitioned`` (what a vendor overrides the
    ``list_*_after`` statements with, its keyset term spelled its way)."""
    return _LIST_BY_STAGE.format(
        after=" AND " + after_key if after_key else "",
        partitioned=_PARTITIONED if partitioned else "",
    )


#: The partial predicate of the filter indexes (migration 0018), repeated in the
#: filtered lists' statements: SQLite uses a partial index only for a query that
#: holds its terms.
IN_FILTER_INDEXES = "stage NOT IN ('enqueued', 'running')"
#: The stages whose rows the filter indexes leave out.
UNINDEXED_FILTER_STAGES = ("enqueued", "running")
#: The columns a filtered list may match, in the order their terms are written.
FILTER_COLUMNS = ("payload_type", "queue_name", "error_class")


@functools.cache
def list_filtered(
    columns: tuple[str, ...],
    *,
    after: bool,
    since: bool,
    indexed: bool,
    expanded: bool = False,
    hashed: tuple[str, ...] = (),
) -> str:
    """A keyset page of one stage's unexpired rows whose ``columns`` (of
    :data:`FILTER_COLUMNS`) equal the parameters of the same names, newest first;
    ``after``: behind the key ``(after_date_ms, after_job_id)`` (``expanded``: as
    :data:`AFTER_STAGE_KEY_EXPANDED` says it); ``since``: none older than
    ``since_ms``; ``indexed``: the stage is one the filter indexes hold (their
    predicate is written in); ``hashed``: the columns the vendor's filter indexes hold
    as ``<column>_hash``, their SHA-256 (MySQL, migration 0019), matched first by that
    hash. Fixed text only: every value is a parameter. :meth:`IndexQueries.list_filtered`
    passes the vendor's pieces."""
    unknown = set(columns) - set(FILTER_COLUMNS)
    if unknown or not columns:
        raise ValueError(f"not filter columns: {sorted(unknown) or columns}")
    terms = ["namespace = %(namespace)s", "stage = %(stage)s"]
    if indexed:
        terms.append(IN_FILTER_INDEXES)
    for column in FILTER_COLUMNS:
        if column in columns:
            if column in hashed:
                terms.append(f"{column}_hash = UNHEX(SHA2(%({column})s, 256))")
            terms.append(f"{column} = %({column})s")
    if after:
        terms.append(AFTER_STAGE_KEY_EXPANDED if expanded else AFTER_STAGE_KEY)
    if since:
        terms.append("stage_date_ms >= %(since_ms)s")
    terms.append("(date_expire IS NULL OR date_expire > %(now)s)")
    return (
        f"SELECT {ROW_COLUMNS} FROM later_jobs_index WHERE "
        + " AND ".join(terms)
        + " ORDER BY stage_date_ms DESC, job_id DESC LIMIT %(limit)s"
    )


_LIST_BY_PARTITION = (
    f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
    " WHERE namespace = %(namespace)s AND topic = %(topic)s"
    " AND partition_id = %(partition_id)s{after}"
    " ORDER BY sequence DESC LIMIT %(limit)s"
)


class IndexQueries:
    """Index, counter, metric and queue-sample statements."""

    #: Whether the keyset term of the stage lists is :data:`AFTER_STAGE_KEY_EXPANDED`
    #: (in :meth:`list_filtered`; a vendor that sets it overrides
    #: ``list_by_stage_after`` and ``list_partitioned_enqueued_after`` with it too).
    keyset_expanded: bool = False
    #: The filter columns the vendor's filter indexes hold hashed (see :func:`list_filtered`).
    hashed_filter_columns: tuple[str, ...] = ()

    def list_filtered(
        self, columns: tuple[str, ...], *, after: bool, since: bool, indexed: bool
    ) -> str:
        """This vendor's :func:`list_filtered` statement."""
        return list_filtered(
            columns,
            after=after,
            since=since,
            indexed=indexed,
            expanded=self.keyset_expanded,
            hashed=self.hashed_filter_columns,
        )

    get = (
        f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
        " WHERE namespace = %(namespace)s AND job_id = %(job_id)s"
    )
    # Three O(1)/bounded parts: the striped live-stage counters (summed over
    # shards), the queue depth of the namespace's job queues (summed over
    # queues and shards), and the finished stages from the covering index
    # with the expiry filter (bounded by retention).
    stage_counts = (
        "SELECT stage, SUM(count) FROM later_stage_counts"
        f" WHERE namespace = %(namespace)s AND stage IN ({LIVE_STAGE_LIST})"
        " GROUP BY stage"
        " UNION ALL"
        f" SELECT '{QUEUE_DEPTH_LABEL}', SUM(ready) FROM later_queue_depth"
        " WHERE namespace = %(namespace)s"
        " UNION ALL"
        " SELECT stage, COUNT(*) FROM later_jobs_index"
        f" WHERE namespace = %(namespace)s AND stage IN ({FINISHED_STAGE_LIST})"
        " AND (date_expire IS NULL OR date_expire > %(now)s)"
        " GROUP BY stage"
    )

    # --- reconcile: one statement per counter table ---
    # A writer's rows and the counter deltas its triggers make commit together,
    # so within one snapshot the rows and the counters differ only by the drift.
    # Each statement reads both in one snapshot and adds (rows - counters) to
    # shard 0; the deltas of writers committing meanwhile are left as they are,
    # so the sums are exact once they commit. (Deleting the counters and then
    # recounting, in two statements, counted twice a writer that committed in
    # between with a counter row it had just created.) No drift, no write.
    reconcile_stage_counts = (
        "INSERT INTO later_stage_counts (namespace, stage, shard, count)"
        " SELECT namespace, stage, 0, SUM(n) FROM ("
        "SELECT namespace, stage, COUNT(*) AS n FROM later_jobs_index"
        f" WHERE namespace = %(namespace)s AND stage IN ({COUNTED_STAGE_LIST})"
        " GROUP BY namespace, stage"
        " UNION ALL"
        " SELECT namespace, stage, -SUM(count) FROM later_stage_counts"
        " WHERE namespace = %(namespace)s GROUP BY namespace, stage"
        ") AS drift WHERE true"
        " GROUP BY namespace, stage HAVING SUM(n) <> 0 ORDER BY namespace, stage"
        " ON CONFLICT (namespace, stage, shard) DO UPDATE SET"
        " count = later_stage_counts.count + excluded.count"
    )
    # The rows a recount would read, counted only up to ``limit``: a read of at
    # most ``limit`` index entries, whatever the table holds.
    reconcile_index_rows_within = (
        "SELECT COUNT(*) FROM (SELECT 1 FROM later_jobs_index"
        " WHERE namespace = %(namespace)s LIMIT %(limit)s) AS probe"
    )
    reconcile_queue_rows_within = (
        "SELECT COUNT(*) FROM (SELECT 1 FROM later_delivery_queue"
        " WHERE namespace = %(namespace)s LIMIT %(limit)s) AS probe"
    )
    reconcile_queue_depth = (
        "INSERT INTO later_queue_depth (namespace, queue_name, shard, ready)"
        " SELECT namespace, queue_name, 0, SUM(n) FROM ("
        "SELECT namespace, queue_name, COUNT(*) AS n FROM later_delivery_queue"
        " WHERE namespace = %(namespace)s AND lease_until IS NULL"
        " GROUP BY namespace, queue_name"
        " UNION ALL"
        " SELECT namespace, queue_name, -SUM(ready) FROM later_queue_depth"
        " WHERE namespace = %(namespace)s GROUP BY namespace, queue_name"
        ") AS drift WHERE true"
        " GROUP BY namespace, queue_name HAVING SUM(n) <> 0 ORDER BY namespace, queue_name"
        " ON CONFLICT (namespace, queue_name, shard) DO UPDATE SET"
        " ready = later_queue_depth.ready + excluded.ready"
    )

    # --- listings (keyset pages; LIMIT is the page size plus one) ---
    list_by_stage_first = _LIST_BY_STAGE.format(after="", partitioned="")
    list_by_stage_after = _LIST_BY_STAGE.format(after=_AFTER_STAGE_KEY, partitioned="")
    list_partitioned_enqueued_first = _LIST_BY_STAGE.format(after="", partitioned=_PARTITIONED)
    list_partitioned_enqueued_after = _LIST_BY_STAGE.format(
        after=_AFTER_STAGE_KEY, partitioned=_PARTITIONED
    )
    list_by_partition_first = _LIST_BY_PARTITION.format(after="")
    list_by_partition_after = _LIST_BY_PARTITION.format(after=" AND sequence < %(before)s")
    partition_neighbor = (
        f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
        " WHERE namespace = %(namespace)s AND topic = %(topic)s"
        " AND partition_id = %(partition_id)s AND sequence = %(sequence)s"
    )
    list_continuations = (
        f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
        " WHERE namespace = %(namespace)s AND parent_job_id = %(parent_job_id)s"
        " ORDER BY stage_date_ms, job_id LIMIT %(limit)s"
    )

    # --- metrics ---
    recent_transition_count = (
        "SELECT COALESCE(SUM(count), 0) FROM later_job_transition_metrics"
        " WHERE namespace = %(namespace)s AND stage = %(stage)s"
        " AND minute_bucket >= %(first_bucket)s AND minute_bucket <= %(last_bucket)s"
    )
    recent_wait_stats = (
        "SELECT COALESCE(SUM(count), 0), COALESCE(SUM(sum_ms), 0), COALESCE(MAX(max_ms), 0)"
        " FROM later_job_wait_metrics"
        " WHERE namespace = %(namespace)s AND mode = %(mode)s"
        " AND minute_bucket >= %(first_bucket)s AND minute_bucket <= %(last_bucket)s"
    )
    sweep_transitions = (
        "DELETE FROM later_job_transition_metrics"
        " WHERE namespace = %(namespace)s AND minute_bucket < %(before_bucket)s"
    )
    sweep_waits = (
        "DELETE FROM later_job_wait_metrics"
        " WHERE namespace = %(namespace)s AND minute_bucket < %(before_bucket)s"
    )

    # --- queue samples ---
    queue_sample_upsert = (
        "INSERT INTO later_queue_samples (namespace, minute_bucket, queued, partitioned)"
        " VALUES (%(namespace)s, %(bucket)s, %(queued)s, %(partitioned)s)"
        " ON CONFLICT (namespace, minute_bucket) DO UPDATE SET"
        " queued = excluded.queued, partitioned = excluded.partitioned"
    )
    queue_sample_trim = (
        "DELETE FROM later_queue_samples"
        " WHERE namespace = %(namespace)s AND minute_bucket < %(before_bucket)s"
    )
    # Ready depth of the job queues, partitioned queued jobs.
    queue_sample_counts = (
        "SELECT (SELECT COALESCE(SUM(ready), 0) FROM later_queue_depth"
        " WHERE namespace = %(namespace)s),"
        " (SELECT COALESCE(SUM(count), 0) FROM later_stage_counts"
        " WHERE namespace = %(namespace)s AND stage = 'enqueued')"
    )
    queue_samples_since = (
        "SELECT minute_bucket, queued, partitioned FROM later_queue_samples"
        " WHERE namespace = %(namespace)s AND minute_bucket >= %(since_bucket)s"
        " ORDER BY minute_bucket"
    )

    # --- purge of leftovers of earlier dashboards (bounded deletes) ---
    purge_range_exact = (
        "DELETE FROM later_storage_range WHERE sequence IN ("
        " SELECT sequence FROM later_storage_range WHERE range_key = %(key)s LIMIT %(limit)s)"
    )

    # Spelled per vendor. Lists (``job_ids``) are one bound parameter.
    #: Rows of :data:`ROW_FIELDS`, shared ``namespace``; one row per job, in job-id order.
    upsert: RowsStatement
    remove: str
    #: The unclaimed job-queue messages, newest first (``list_queued_before``: those
    #: before the sequence ``before``), read through the queue's primary key.
    list_queued_first: str
    list_queued_before: str
    #: Deletes up to ``limit`` expired index rows of the namespace -> their job ids,
    #: skipping a job whose key ``held_prefix || job_id || held_suffix`` (its
    #: dependents counter) exists.
    sweep_index: str
    #: (keys): deletes the records among ``keys`` that hold a ``date_expire_unindexed``
    #: (a record written live again since, e.g. retried, holds none). Not compared
    #: with ``now``: the record's expiry is computed from the storage layer's own
    #: clock reading in the same transaction as its index row's, so it may lie a few
    #: milliseconds later, and the index row that finds it is gone after this sweep.
    sweep_records: str
    #: Rows of (stage, minute_bucket, count), shared ``namespace``.
    record_transitions: RowsStatement
    #: Rows of (mode, minute_bucket, count, sum_ms, max_ms), shared ``namespace``.
    record_waits: RowsStatement
    #: Range rows whose key lies in the half-open ``[start, stop)`` (byte order).
    purge_range_prefix: str
    purge_queued_index_rows: str
