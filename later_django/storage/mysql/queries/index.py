"""MySQL/MariaDB statements of the job index, its counters, metrics and queue samples.

* **Upserts** are derived ``UNION ALL`` rows under ``ON DUPLICATE KEY UPDATE``. Its
  assignments run left to right, each seeing the columns already assigned, so
  PostgreSQL's ``DO UPDATE ... WHERE excluded.revision >= revision`` becomes an
  ``IF`` on every column with ``revision``, which the condition reads, assigned last.
* **Reconcile** groups the drift inside a derived table: MySQL refuses an
  ``ON DUPLICATE KEY UPDATE`` that names a grouped ``SELECT``'s columns. Under READ
  COMMITTED the ``SELECT`` of an ``INSERT ... SELECT`` is one consistent read, as
  PostgreSQL's statement snapshot is.
* **Keyset pages** spell the row value out (:data:`AFTER_STAGE_KEY_EXPANDED`):
  ``(a, b) < (x, y)`` is no index range there, and a page read every row before its
  cursor.
* **Lists** bind as JSON arrays: ``IN (SELECT v FROM JSON_TABLE(...))`` in reads, a
  multi-table ``DELETE`` joined to ``JSON_TABLE`` in writes (the ``IN`` form scans
  the whole table in a ``DELETE`` on MariaDB 10.11).
* **Bounded deletes** are ``DELETE ... LIMIT n`` (MySQL refuses ``LIMIT`` in an
  ``IN`` subquery). The sweep of expired index rows returns their job ids, so it
  locks them first (``FOR UPDATE SKIP LOCKED``), deletes those, and answers them.
* The filter indexes hold ``payload_type`` and ``error_class`` as SHA-256 hashes
  (migration 0019): a filter on them matches the hash, then the text.
"""

from __future__ import annotations

from later_django.storage.driver import Returning, RowsStatement
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.index import (
    AFTER_STAGE_KEY_EXPANDED,
    COUNTED_STAGE_LIST,
    ROW_FIELDS,
    TRANSITIONS_INTO,
    UPSERT_INTO,
    WAITS_INTO,
    IndexQueries,
    list_by_stage,
    queued_messages,
)

_UNION = " UNION ALL "
_INDEX = "later_jobs_index"


def _ids_table(name: str, width: int = 200) -> str:
    """The JSON array ``%(<name>)s`` as the rows of ``j.v``, compared byte by byte as
    the ``utf8mb4_bin`` key columns are."""
    return (
        f"JSON_TABLE(%({name})s, '$[*]' COLUMNS "
        f"(v VARCHAR({width}) COLLATE utf8mb4_bin PATH '$')) AS j"
    )


def _probed(ids: str, table: str, alias: str, on: str) -> str:
    """The ids of ``ids`` (a ``JSON_TABLE``), then one probe of ``table``'s primary key
    each: the order and the index written out. Left to itself, MariaDB read a small
    namespace's rows by another index first, and a write then locked every one of them."""
    return f"{ids} STRAIGHT_JOIN {table} AS {alias} FORCE INDEX (PRIMARY) ON {on}"


_INDEX_ROW_OF_ID = "i.namespace = %(namespace)s AND i.job_id = j.v"


def _derived(columns: tuple[str, ...]) -> str:
    """A batch's rows named ``new.<column>``: a head that yields no row names the
    columns, so every row group is the same ``SELECT`` of placeholders."""
    head = ", ".join(f"NULL AS {column}" for column in columns)
    return "(SELECT " + head + " FROM DUAL WHERE FALSE" + _UNION + "{values}) AS new"


def _row(columns: tuple[str, ...]) -> str:
    return "SELECT " + ", ".join(f"%({column})s" for column in columns)


#: The upsert's guard: the incoming row is at least as new as the stored one. It reads
#: the stored ``revision``, so ``revision`` is assigned after every other column.
_NEWER = f"new.revision >= {_INDEX}.revision"


def _guarded(column: str, value: str) -> str:
    return f"{column} = IF({_NEWER}, {value}, {_INDEX}.{column})"


def _kept_unless_given(column: str) -> str:
    return f"COALESCE(new.{column}, {_INDEX}.{column})"


_UPSERT_CONFLICT = " ON DUPLICATE KEY UPDATE " + ", ".join(
    [
        _guarded("payload_type", "new.payload_type"),
        _guarded("stage", "new.stage"),
        _guarded("stage_date_ms", "new.stage_date_ms"),
        _guarded("wait_ms", _kept_unless_given("wait_ms")),
        _guarded("wait_mode", _kept_unless_given("wait_mode")),
        _guarded("topic", "new.topic"),
        _guarded("partition_id", "new.partition_id"),
        _guarded("sequence", "new.sequence"),
        _guarded("parent_job_id", _kept_unless_given("parent_job_id")),
        _guarded("date_expire", "new.date_expire"),
        _guarded("queue_name", "new.queue_name"),
        _guarded("error_class", "new.error_class"),
        _guarded("revision", "new.revision"),
    ]
)

_TRANSITION_FIELDS = ("stage", "minute_bucket", "count")
_WAIT_FIELDS = ("mode", "minute_bucket", "count", "sum_ms", "max_ms")
_WAITS = "later_job_wait_metrics"


def _reconcile(table: str, key: str, value: str, rows: str) -> str:
    """Adds ``rows`` minus the counters of ``table`` to shard 0, per ``key``, where
    they differ; the drift grouped inside a derived table (see the module docstring)."""
    return (
        f"INSERT INTO {table} (namespace, {key}, shard, {value})"
        f" SELECT new.namespace, new.{key}, 0, new.n FROM ("
        f"SELECT namespace, {key}, SUM(n) AS n FROM (" + rows + " UNION ALL"
        f" SELECT namespace, {key}, -SUM({value}) FROM {table}"
        f" WHERE namespace = %(namespace)s GROUP BY namespace, {key}"
        f") AS drift GROUP BY namespace, {key} HAVING SUM(n) <> 0"
        f") AS new ORDER BY new.namespace, new.{key}"
        f" ON DUPLICATE KEY UPDATE {value} = {table}.{value} + new.n"
    )


@MysqlDriver.register
class MysqlIndexQueries(IndexQueries):
    keyset_expanded = True
    hashed_filter_columns = ("payload_type", "error_class")

    list_by_stage_after = list_by_stage(AFTER_STAGE_KEY_EXPANDED)
    list_partitioned_enqueued_after = list_by_stage(AFTER_STAGE_KEY_EXPANDED, partitioned=True)

    upsert = RowsStatement(
        UPSERT_INTO
        + " SELECT %(namespace)s, "
        + ", ".join(f"new.{field}" for field in ROW_FIELDS)
        + " FROM "
        + _derived(ROW_FIELDS)
        + _UPSERT_CONFLICT,
        row=_row(ROW_FIELDS),
        joiner=_UNION,
    )
    remove = "DELETE i FROM " + _probed(_ids_table("job_ids"), _INDEX, "i", _INDEX_ROW_OF_ID)
    # The queue's primary key walked backwards, so a page reads about its size.
    list_queued_first = queued_messages("later_delivery_queue FORCE INDEX (PRIMARY)", before=False)
    list_queued_before = queued_messages("later_delivery_queue FORCE INDEX (PRIMARY)", before=True)
    # Lock then write: the expired rows not held, oldest first along the expiry index
    # (rows another sweeper holds are skipped); those locked rows are deleted, and
    # their ids are the answer (no one else can change a row this transaction holds).
    sweep_index = Returning(
        ["DELETE i FROM " + _probed(_ids_table("locked"), _INDEX, "i", _INDEX_ROW_OF_ID)],
        "SELECT j.v FROM " + _ids_table("locked"),
        lock=(
            f"SELECT i.job_id FROM {_INDEX} AS i FORCE INDEX (later_jobs_index_expire_idx)"
            " WHERE i.namespace = %(namespace)s AND i.date_expire IS NOT NULL"
            " AND i.date_expire <= %(now)s AND NOT EXISTS (SELECT 1 FROM later_storage AS s"
            " WHERE s.`key` = CONCAT(%(held_prefix)s, i.job_id, %(held_suffix)s))"
            " ORDER BY i.date_expire LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
        ),
    )
    sweep_records = (
        "DELETE s FROM "
        + _probed(_ids_table("keys", 500), "later_storage", "s", "s.`key` = j.v")
        + " WHERE s.date_expire_unindexed IS NOT NULL"
    )
    record_transitions = RowsStatement(
        TRANSITIONS_INTO
        + " SELECT %(namespace)s, new.stage, new.minute_bucket, new.count FROM "
        + _derived(_TRANSITION_FIELDS)
        + " ON DUPLICATE KEY UPDATE count = later_job_transition_metrics.count + new.count",
        row=_row(_TRANSITION_FIELDS),
        joiner=_UNION,
    )
    # GREATEST is NULL when an argument is (PostgreSQL's skips NULLs).
    record_waits = RowsStatement(
        WAITS_INTO
        + " SELECT %(namespace)s, "
        + ", ".join(f"new.{field}" for field in _WAIT_FIELDS)
        + " FROM "
        + _derived(_WAIT_FIELDS)
        + f" ON DUPLICATE KEY UPDATE count = {_WAITS}.count + new.count,"
        f" sum_ms = {_WAITS}.sum_ms + new.sum_ms,"
        f" max_ms = GREATEST({_WAITS}.max_ms, COALESCE(new.max_ms, {_WAITS}.max_ms))",
        row=_row(_WAIT_FIELDS),
        joiner=_UNION,
    )
    queue_sample_upsert = (
        "INSERT INTO later_queue_samples (namespace, minute_bucket, queued, partitioned)"
        " VALUES (%(namespace)s, %(bucket)s, %(queued)s, %(partitioned)s)"
        " ON DUPLICATE KEY UPDATE queued = %(queued)s, partitioned = %(partitioned)s"
    )
    reconcile_stage_counts = _reconcile(
        "later_stage_counts",
        "stage",
        "count",
        f"SELECT namespace, stage, COUNT(*) AS n FROM {_INDEX}"
        f" WHERE namespace = %(namespace)s AND stage IN ({COUNTED_STAGE_LIST})"
        " GROUP BY namespace, stage",
    )
    reconcile_queue_depth = _reconcile(
        "later_queue_depth",
        "queue_name",
        "ready",
        "SELECT namespace, queue_name, COUNT(*) AS n FROM later_delivery_queue"
        " WHERE namespace = %(namespace)s AND lease_until IS NULL"
        " GROUP BY namespace, queue_name",
    )
    # Bounded deletes: the key's own index range, at most ``limit`` rows. The range
    # keys are utf8mb4_bin, compared in byte order (PostgreSQL's COLLATE "C").
    purge_range_exact = "DELETE FROM later_storage_range WHERE range_key = %(key)s LIMIT %(limit)s"
    purge_range_prefix = (
        "DELETE FROM later_storage_range"
        " WHERE range_key >= %(start)s AND range_key < %(stop)s LIMIT %(limit)s"
    )
    # The leftovers' index (namespace, stage, topic, job_id): MySQL's for the partial one.
    purge_queued_index_rows = (
        f"DELETE FROM {_INDEX} WHERE namespace = %(namespace)s AND stage = 'enqueued'"
        " AND topic IS NULL LIMIT %(limit)s"
    )
