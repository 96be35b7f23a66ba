"""PostgreSQL statements of ``later_storage``: lists as arrays, rows via ``unnest``."""

from __future__ import annotations

from later_django.storage.driver import Replanned, RowsStatement
from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.kv import (
    INCREMENT_CONFLICT,
    INCREMENT_INTO,
    LIVE,
    LIVE_MEMBER,
    RANGE_ADD_CONFLICT,
    SET_CONFLICT,
    SET_INTO,
    KvQueries,
)

#: The rows of the ranges named by the array ``{keys}``, as ``r``, found by one probe
#: of ``later_storage_range_key_idx`` per key whatever the table's statistics say:
#: a probe estimated at one row costs less than a scan of the table even as the
#: planner sees a table never analysed (10 pages), so a plan cached while the table
#: was nearly empty probes too. ``range_key = ANY(array)`` instead scanned every row
#: once the table had grown (a worker's prepared plan, made on a fresh table; a
#: server without autovacuum never re-plans it): 3-7 ms a finish beside a
#: 10,000-job batch's 28,000 rows. ``OFFSET 0`` keeps the subquery from being
#: flattened into a join the planner could hash over the whole table.
RANGE_ROWS = (
    "unnest({keys}::varchar[]) AS k(key) CROSS JOIN LATERAL (SELECT range_key, value, "
    "sequence, date_expire FROM later_storage_range WHERE range_key = k.key OFFSET 0) AS r"
)


@PostgresDriver.register
class PostgresKvQueries(KvQueries):
    get_many = "SELECT key, value FROM later_storage WHERE key = ANY(%(keys)s) AND " + LIVE
    get_many_for_update = (
        "SELECT key, value FROM later_storage WHERE key = ANY(%(keys)s) AND " + LIVE + " "
        "ORDER BY key FOR UPDATE"
    )
    delete_many = "DELETE FROM later_storage WHERE key = ANY(%(keys)s)"
    range_clear_many = "DELETE FROM later_storage_range WHERE range_key = ANY(%(keys)s)"
    range_members_many = (
        "SELECT range_key, value FROM later_storage_range "
        "WHERE range_key = ANY(%(keys)s) AND " + LIVE_MEMBER + " ORDER BY range_key, sequence"
    )
    # A finishing parent's children: the ranges' rows read, and the counters their
    # live marked members name decremented (rows locked in key order), in one round
    # trip. Kind 0 rows are live members, 2 expired ones, 1 counters as left.
    read_ranges_decrementing = (
        "WITH found AS MATERIALIZED (SELECT r.range_key, r.value, r.sequence, r.date_expire "
        "FROM " + RANGE_ROWS.format(keys="%(keys)s") + "), "
        "wanted AS (SELECT (%(prefix)s || convert_from(substring(value FROM %(skip)s), 'UTF8') "
        "|| %(suffix)s)::varchar AS key, COUNT(*) AS by FROM found WHERE " + LIVE_MEMBER + " "
        "AND substring(value FROM 1 FOR %(mark_length)s) = %(mark)s GROUP BY 1), "
        "decremented AS (UPDATE later_storage AS s "
        "SET counter_value = s.counter_value - w.by, date_updated = %(now)s FROM wanted AS w "
        "WHERE s.key = w.key AND s.key IN (SELECT key FROM later_storage "
        "WHERE key IN (SELECT key FROM wanted) AND counter_value IS NOT NULL "
        "ORDER BY key FOR UPDATE) RETURNING s.key, s.counter_value) "
        "SELECT CASE WHEN " + LIVE_MEMBER + " THEN 0 ELSE 2 END, range_key, value, sequence, "
        "NULL::bigint FROM found "
        "UNION ALL SELECT 1, key, NULL, NULL, counter_value FROM decremented ORDER BY 1, 2, 4"
    )
    # Planned at each run: its right plan is a probe per row for a few rows of a large
    # table, which a plan cached while the table was small would not be (a scan).
    range_rows_delete = Replanned(
        "DELETE FROM later_storage_range WHERE sequence = ANY(%(sequences)s::bigint[])"
    )
    # The ranges (a finishing parent's children ranges) are emptied by the same statement.
    decrement_many = Replanned(
        "WITH cleared AS (DELETE FROM later_storage_range WHERE sequence = ANY(ARRAY("
        "SELECT r.sequence FROM " + RANGE_ROWS.format(keys="%(ranges)s") + "))) "
        "UPDATE later_storage SET counter_value = counter_value - %(by)s, date_updated = %(now)s "
        "WHERE key IN (SELECT key FROM later_storage WHERE key = ANY(%(keys)s) "
        "AND counter_value IS NOT NULL ORDER BY key FOR UPDATE) "
        "RETURNING key, counter_value"
    )
    set_many = RowsStatement(
        SET_INTO + "SELECT batch.key, batch.value, NULL, %(now)s, NULL, batch.date_expire, "
        "batch.date_expire_unindexed "
        "FROM unnest(%(key)s::varchar[], %(value)s::bytea[], %(date_expire)s::bigint[], "
        "%(date_expire_unindexed)s::bigint[]) "
        "AS batch(key, value, date_expire, date_expire_unindexed) ORDER BY batch.key"
        + SET_CONFLICT,
        one=SET_INTO + "VALUES (%(key)s, %(value)s, NULL, %(now)s, NULL, %(date_expire)s, "
        "%(date_expire_unindexed)s)" + SET_CONFLICT,
    )
    increment_many = RowsStatement(
        INCREMENT_INTO + "SELECT batch.key, NULL, batch.by, %(now)s, NULL, NULL "
        "FROM unnest(%(key)s::varchar[], %(by)s::bigint[]) AS batch(key, by) "
        "ORDER BY batch.key" + INCREMENT_CONFLICT
    )
    range_add_many = RowsStatement(
        "INSERT INTO later_storage_range (range_key, value, date_expire) "
        "SELECT batch.key, batch.value, batch.date_expire "
        "FROM unnest(%(key)s::varchar[], %(value)s::bytea[], %(date_expire)s::bigint[]) "
        "WITH ORDINALITY AS batch(key, value, date_expire, position) ORDER BY batch.position"
        + RANGE_ADD_CONFLICT
    )
