"""Named SQL of the dashboard job index, its counters, metrics and queue samples.

Every statement takes ``%s`` placeholders; nothing is built from values. The
stage lists are the code constants of :mod:`later_django.storage.types`,
written into the text once at import.

Batched writes differ per vendor:

* PostgreSQL binds one array per column and inserts ``FROM unnest(...)``, so a
  batch of any size is one statement with one fixed text;
* SQLite has no arrays: its batched statements carry a ``{values}`` marker that
  :func:`~later_django.storage.db.expand_values` replaces with the statement's ``*_values`` group of
  placeholders repeated once per row (values are still bound, never written).

Prefix ranges on PostgreSQL compare with ``COLLATE "C"``: a half-open range
``[prefix, prefix-with-last-char-bumped)`` holds exactly the keys starting
with the prefix only under byte order, and a database's default collation
(e.g. ``en_US.UTF-8``) need not be byte order.
"""

from __future__ import annotations

from later_django.core.keys import RESERVED_PREFIX
from later_django.core.stages import FINISHED_STAGES, LIVE_STAGES
from later_django.storage.db import Statements


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
    "wait_mode, topic, partition_id, sequence, parent_job_id, date_expire"
)

#: Queue names starting with this are Later's own, not job queues.
_NOT_INTERNAL_QUEUE = f"substr(queue_name, 1, {len(RESERVED_PREFIX)}) <> '{RESERVED_PREFIX}'"

#: The label of the queue-depth part of ``stage_counts`` (not a stage name).
QUEUE_DEPTH_LABEL = "__queue_depth"

_UPSERT_CONFLICT = (
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
    " date_expire = excluded.date_expire"
    " WHERE excluded.revision >= later_jobs_index.revision"
)
_UPSERT_INTO = f"INSERT INTO later_jobs_index (namespace, {ROW_COLUMNS})"

_TRANSITIONS_CONFLICT = (
    " ON CONFLICT (namespace, stage, minute_bucket) DO UPDATE SET"
    " count = later_job_transition_metrics.count + excluded.count"
)
_WAITS_CONFLICT = (
    " ON CONFLICT (namespace, mode, minute_bucket) DO UPDATE SET"
    " count = later_job_wait_metrics.count + excluded.count,"
    " sum_ms = later_job_wait_metrics.sum_ms + excluded.sum_ms,"
    " max_ms = {greatest}(later_job_wait_metrics.max_ms, excluded.max_ms)"
)

_LIST_BY_STAGE = (
    f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
    " WHERE namespace = %s AND stage = %s{after}{partitioned}"
    " AND (date_expire IS NULL OR date_expire > %s)"
    " ORDER BY stage_date_ms DESC, job_id DESC LIMIT %s"
)
_AFTER_STAGE_KEY = " AND (stage_date_ms, job_id) < (%s, %s)"

_LIST_BY_PARTITION = (
    f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
    " WHERE namespace = %s AND topic = %s AND partition_id = %s{after}"
    " ORDER BY sequence DESC LIMIT %s"
)

_QUEUED = (
    "SELECT sequence, payload, available_at FROM later_delivery_queue{not_indexed}"
    " WHERE namespace = %s AND lease_until IS NULL{before}"
    f" AND {_NOT_INTERNAL_QUEUE}"
    " ORDER BY sequence DESC LIMIT %s"
)

_PURGE_RANGE_EXACT = (
    "DELETE FROM later_storage_range WHERE sequence IN ("
    " SELECT sequence FROM later_storage_range WHERE range_key = %s LIMIT %s)"
)

STATEMENTS = Statements(
    common={
        # --- rows ---
        "get": f"SELECT {ROW_COLUMNS} FROM later_jobs_index WHERE namespace = %s AND job_id = %s",
        # --- stage counts ---
        # Three O(1)/bounded parts: the striped live-stage counters (summed over
        # shards), the queue depth of the namespace's job queues (summed over
        # queues and shards), and the finished stages from the covering index
        # with the expiry filter (bounded by retention).
        "stage_counts": (
            "SELECT stage, SUM(count) FROM later_stage_counts"
            f" WHERE namespace = %s AND stage IN ({LIVE_STAGE_LIST})"
            " GROUP BY stage"
            " UNION ALL"
            f" SELECT '{QUEUE_DEPTH_LABEL}', SUM(ready) FROM later_queue_depth"
            f" WHERE namespace = %s AND {_NOT_INTERNAL_QUEUE}"
            " UNION ALL"
            " SELECT stage, COUNT(*) FROM later_jobs_index"
            f" WHERE namespace = %s AND stage IN ({FINISHED_STAGE_LIST})"
            " AND (date_expire IS NULL OR date_expire > %s)"
            " GROUP BY stage"
        ),
        # --- reconcile (one transaction) ---
        "reconcile_clear_stage_counts": "DELETE FROM later_stage_counts WHERE namespace = %s",
        # Every index row that exists, finished ones too (expired or not: the
        # triggers count a row until the sweep deletes it). ON CONFLICT: on
        # PostgreSQL a trigger of a concurrent writer may have re-created shard 0
        # of a stage since the delete; its delta then adds up.
        "reconcile_recount_stages": (
            "INSERT INTO later_stage_counts (namespace, stage, shard, count)"
            " SELECT namespace, stage, 0, COUNT(*) FROM later_jobs_index"
            f" WHERE namespace = %s AND stage IN ({COUNTED_STAGE_LIST})"
            " GROUP BY namespace, stage"
            " ON CONFLICT (namespace, stage, shard) DO UPDATE SET"
            " count = later_stage_counts.count + excluded.count"
        ),
        "reconcile_clear_queue_depth": "DELETE FROM later_queue_depth WHERE namespace = %s",
        "reconcile_recount_queue_depth": (
            "INSERT INTO later_queue_depth (namespace, queue_name, shard, ready)"
            " SELECT namespace, queue_name, 0, COUNT(*) FROM later_delivery_queue"
            " WHERE namespace = %s AND lease_until IS NULL"
            " GROUP BY namespace, queue_name"
            " ON CONFLICT (namespace, queue_name, shard) DO UPDATE SET"
            " ready = later_queue_depth.ready + excluded.ready"
        ),
        # --- listings (keyset pages; LIMIT is the page size plus one) ---
        "list_by_stage_first": _LIST_BY_STAGE.format(after="", partitioned=""),
        "list_by_stage_after": _LIST_BY_STAGE.format(after=_AFTER_STAGE_KEY, partitioned=""),
        "list_partitioned_enqueued_first": _LIST_BY_STAGE.format(
            after="", partitioned=" AND topic IS NOT NULL"
        ),
        "list_partitioned_enqueued_after": _LIST_BY_STAGE.format(
            after=_AFTER_STAGE_KEY, partitioned=" AND topic IS NOT NULL"
        ),
        "list_queued_first": _QUEUED.format(not_indexed="", before=""),
        "list_queued_before": _QUEUED.format(not_indexed="", before=" AND sequence < %s"),
        "list_by_partition_first": _LIST_BY_PARTITION.format(after=""),
        "list_by_partition_after": _LIST_BY_PARTITION.format(after=" AND sequence < %s"),
        "partition_neighbor": (
            f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
            " WHERE namespace = %s AND topic = %s AND partition_id = %s AND sequence = %s"
        ),
        "list_continuations": (
            f"SELECT {ROW_COLUMNS} FROM later_jobs_index"
            " WHERE namespace = %s AND parent_job_id = %s"
            " ORDER BY stage_date_ms, job_id LIMIT %s"
        ),
        # --- metrics ---
        "recent_transition_count": (
            "SELECT COALESCE(SUM(count), 0) FROM later_job_transition_metrics"
            " WHERE namespace = %s AND stage = %s AND minute_bucket >= %s AND minute_bucket <= %s"
        ),
        "recent_wait_stats": (
            "SELECT COALESCE(SUM(count), 0), COALESCE(SUM(sum_ms), 0), COALESCE(MAX(max_ms), 0)"
            " FROM later_job_wait_metrics"
            " WHERE namespace = %s AND mode = %s AND minute_bucket >= %s AND minute_bucket <= %s"
        ),
        "sweep_transitions": (
            "DELETE FROM later_job_transition_metrics WHERE namespace = %s AND minute_bucket < %s"
        ),
        "sweep_waits": (
            "DELETE FROM later_job_wait_metrics WHERE namespace = %s AND minute_bucket < %s"
        ),
        # --- queue samples ---
        "queue_sample_upsert": (
            "INSERT INTO later_queue_samples (namespace, minute_bucket, queued, partitioned)"
            " VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (namespace, minute_bucket) DO UPDATE SET"
            " queued = excluded.queued, partitioned = excluded.partitioned"
        ),
        "queue_sample_trim": (
            "DELETE FROM later_queue_samples WHERE namespace = %s AND minute_bucket < %s"
        ),
        # (namespace, namespace): ready depth of the job queues, partitioned queued jobs
        "queue_sample_counts": (
            "SELECT (SELECT COALESCE(SUM(ready), 0) FROM later_queue_depth"
            f" WHERE namespace = %s AND {_NOT_INTERNAL_QUEUE}),"
            " (SELECT COALESCE(SUM(count), 0) FROM later_stage_counts"
            " WHERE namespace = %s AND stage = 'enqueued')"
        ),
        "queue_samples_since": (
            "SELECT minute_bucket, queued, partitioned FROM later_queue_samples"
            " WHERE namespace = %s AND minute_bucket >= %s ORDER BY minute_bucket"
        ),
        # --- purge of leftovers of earlier dashboards (bounded deletes) ---
        "purge_range_exact": _PURGE_RANGE_EXACT,
    },
    sqlite={
        # Walk the queue backwards by its rowid (``sequence``), so a page reads
        # about the page size; SQLite would otherwise pick the claim index for
        # ``namespace`` and sort the whole namespace's queue.
        "list_queued_first": _QUEUED.format(not_indexed=" NOT INDEXED", before=""),
        "list_queued_before": _QUEUED.format(
            not_indexed=" NOT INDEXED", before=" AND sequence < %s"
        ),
        "upsert": _UPSERT_INTO + " VALUES {values}" + _UPSERT_CONFLICT,
        "upsert_values": "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        "remove": (
            "DELETE FROM later_jobs_index"
            " WHERE namespace = %s AND job_id IN (SELECT value FROM json_each(%s))"
        ),
        "truncate_partition": (
            "DELETE FROM later_jobs_index WHERE rowid IN ("
            " SELECT rowid FROM later_jobs_index"
            " WHERE namespace = %s AND topic = %s AND partition_id = %s"
            " ORDER BY sequence DESC LIMIT -1 OFFSET %s)"
        ),
        "sweep_index": (
            "DELETE FROM later_jobs_index WHERE rowid IN ("
            " SELECT rowid FROM later_jobs_index"
            " WHERE namespace = %s AND date_expire IS NOT NULL AND date_expire <= %s LIMIT %s)"
        ),
        "record_transitions": (
            "INSERT INTO later_job_transition_metrics (namespace, stage, minute_bucket, count)"
            " VALUES {values}" + _TRANSITIONS_CONFLICT
        ),
        "record_transitions_values": "(%s, %s, %s, %s)",
        "record_waits": (
            "INSERT INTO later_job_wait_metrics"
            " (namespace, mode, minute_bucket, count, sum_ms, max_ms)"
            " VALUES {values}" + _WAITS_CONFLICT.format(greatest="MAX")
        ),
        "record_waits_values": "(%s, %s, %s, %s, %s, %s)",
        "purge_range_prefix": (
            "DELETE FROM later_storage_range WHERE sequence IN ("
            " SELECT sequence FROM later_storage_range"
            " WHERE range_key >= %s AND range_key < %s LIMIT %s)"
        ),
        "purge_queued_index_rows": (
            "DELETE FROM later_jobs_index WHERE rowid IN ("
            " SELECT rowid FROM later_jobs_index"
            " WHERE namespace = %s AND stage = 'enqueued' AND topic IS NULL LIMIT %s)"
        ),
    },
    postgresql={
        "upsert": (
            _UPSERT_INTO + " SELECT %s::text, u.* FROM unnest("
            "%s::text[], %s::text[], %s::text[], %s::bigint[], %s::bigint[], %s::bigint[],"
            " %s::bigint[], %s::text[], %s::text[], %s::integer[], %s::bigint[], %s::text[],"
            " %s::bigint[]) AS u" + _UPSERT_CONFLICT
        ),
        "remove": (
            "DELETE FROM later_jobs_index WHERE namespace = %s AND job_id = ANY(%s::text[])"
        ),
        "truncate_partition": (
            "DELETE FROM later_jobs_index WHERE (namespace, job_id) IN ("
            " SELECT namespace, job_id FROM later_jobs_index"
            " WHERE namespace = %s AND topic = %s AND partition_id = %s"
            " ORDER BY sequence DESC OFFSET %s)"
        ),
        "sweep_index": (
            "DELETE FROM later_jobs_index WHERE (namespace, job_id) IN ("
            " SELECT namespace, job_id FROM later_jobs_index"
            " WHERE namespace = %s AND date_expire IS NOT NULL AND date_expire <= %s LIMIT %s)"
        ),
        "record_transitions": (
            "INSERT INTO later_job_transition_metrics (namespace, stage, minute_bucket, count)"
            " SELECT %s::text, u.* FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS u"
            + _TRANSITIONS_CONFLICT
        ),
        "record_waits": (
            "INSERT INTO later_job_wait_metrics"
            " (namespace, mode, minute_bucket, count, sum_ms, max_ms)"
            " SELECT %s::text, u.* FROM unnest("
            "%s::text[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[]) AS u"
            + _WAITS_CONFLICT.format(greatest="GREATEST")
        ),
        "purge_range_prefix": (
            "DELETE FROM later_storage_range WHERE sequence IN ("
            " SELECT sequence FROM later_storage_range"
            ' WHERE range_key COLLATE "C" >= %s AND range_key COLLATE "C" < %s LIMIT %s)'
        ),
        "purge_queued_index_rows": (
            "DELETE FROM later_jobs_index WHERE (namespace, job_id) IN ("
            " SELECT namespace, job_id FROM later_jobs_index"
            " WHERE namespace = %s AND stage = 'enqueued' AND topic IS NULL LIMIT %s)"
        ),
    },
)
