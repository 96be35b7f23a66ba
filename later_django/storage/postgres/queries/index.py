"""PostgreSQL statements of the job index: lists as arrays, rows via ``unnest``.

Prefix ranges compare with ``COLLATE "C"``: a half-open range
``[prefix, prefix-with-last-char-bumped)`` holds exactly the keys starting
with the prefix only under byte order, and a database's default collation
(e.g. ``en_US.UTF-8``) need not be byte order.
"""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.index import (
    TRANSITIONS_CONFLICT,
    TRANSITIONS_INTO,
    UPSERT_CONFLICT,
    UPSERT_INTO,
    WAITS_INTO,
    IndexQueries,
    queued_messages,
    waits_conflict,
)


@PostgresDriver.register
class PostgresIndexQueries(IndexQueries):
    upsert = RowsStatement(
        UPSERT_INTO + " SELECT %(namespace)s::text, u.* FROM unnest("
        "%(job_id)s::text[], %(payload_type)s::text[], %(stage)s::text[],"
        " %(stage_date_ms)s::bigint[], %(revision)s::bigint[], %(created_at_ms)s::bigint[],"
        " %(wait_ms)s::bigint[], %(wait_mode)s::text[], %(topic)s::text[],"
        " %(partition_id)s::integer[], %(sequence)s::bigint[], %(parent_job_id)s::text[],"
        " %(date_expire)s::bigint[], %(queue_name)s::text[], %(error_class)s::text[]) AS u"
        + UPSERT_CONFLICT
    )
    # The ids as an array whose length the planner cannot see: on a table never
    # analyzed, ``job_id = ANY(%(job_ids)s)`` of 500 promoted jobs was planned as a
    # bitmap walk of the whole namespace (every index row read, the ids filtered),
    # the namespace's selectivity guessed at 0.5 %; here each id is one probe of
    # the primary key, with statistics or without, custom plan or generic.
    remove = (
        "DELETE FROM later_jobs_index WHERE namespace = %(namespace)s"
        " AND job_id = ANY(ARRAY(SELECT unnest(%(job_ids)s::text[])))"
    )
    list_queued_first = queued_messages("later_delivery_queue", before=False)
    list_queued_before = queued_messages("later_delivery_queue", before=True)
    sweep_index = (
        "DELETE FROM later_jobs_index WHERE (namespace, job_id) IN ("
        " SELECT namespace, job_id FROM later_jobs_index AS i"
        " WHERE namespace = %(namespace)s AND date_expire IS NOT NULL"
        " AND date_expire <= %(now)s AND NOT EXISTS (SELECT 1 FROM later_storage"
        " WHERE key = %(held_prefix)s || i.job_id || %(held_suffix)s) LIMIT %(limit)s)"
        " AND date_expire <= %(now)s RETURNING job_id"
    )
    sweep_records = (
        "DELETE FROM later_storage WHERE key = ANY(%(keys)s::varchar[])"
        " AND date_expire_unindexed IS NOT NULL"
    )
    record_transitions = RowsStatement(
        TRANSITIONS_INTO + " SELECT %(namespace)s::text, u.* FROM unnest("
        "%(stage)s::text[], %(minute_bucket)s::bigint[], %(count)s::bigint[]) AS u"
        + TRANSITIONS_CONFLICT
    )
    record_waits = RowsStatement(
        WAITS_INTO + " SELECT %(namespace)s::text, u.* FROM unnest("
        "%(mode)s::text[], %(minute_bucket)s::bigint[], %(count)s::bigint[],"
        " %(sum_ms)s::bigint[], %(max_ms)s::bigint[]) AS u" + waits_conflict("GREATEST")
    )
    purge_range_prefix = (
        "DELETE FROM later_storage_range WHERE sequence IN ("
        " SELECT sequence FROM later_storage_range"
        ' WHERE range_key COLLATE "C" >= %(start)s AND range_key COLLATE "C" < %(stop)s'
        " LIMIT %(limit)s)"
    )
    # The leftovers from their partial index (migration 0017), then one probe of
    # the primary key each (an array, as in ``remove``).
    purge_queued_index_rows = (
        "DELETE FROM later_jobs_index WHERE namespace = %(namespace)s AND job_id = ANY(ARRAY("
        " SELECT job_id FROM later_jobs_index"
        " WHERE namespace = %(namespace)s AND stage = 'enqueued' AND topic IS NULL"
        " LIMIT %(limit)s)) AND stage = 'enqueued' AND topic IS NULL"
    )
