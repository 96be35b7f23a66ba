"""SQLite statements of the job index: lists as JSON arrays, rows as ``VALUES``."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.queries.index import (
    ROW_FIELDS,
    TRANSITIONS_CONFLICT,
    TRANSITIONS_INTO,
    UPSERT_CONFLICT,
    UPSERT_INTO,
    WAITS_INTO,
    IndexQueries,
    queued_messages,
    waits_conflict,
)
from later_django.storage.sqlite import SqliteDriver

_ROW_GROUP = "(%(namespace)s, " + ", ".join(f"%({name})s" for name in ROW_FIELDS) + ")"


@SqliteDriver.register
class SqliteIndexQueries(IndexQueries):
    upsert = RowsStatement(UPSERT_INTO + " VALUES {values}" + UPSERT_CONFLICT, row=_ROW_GROUP)
    remove = (
        "DELETE FROM later_jobs_index"
        " WHERE namespace = %(namespace)s AND job_id IN (SELECT value FROM json_each(%(job_ids)s))"
    )
    # Walk the queue backwards by its rowid (``sequence``), so a page reads
    # about the page size; SQLite would otherwise pick the claim index for
    # ``namespace`` and sort the whole namespace's queue.
    list_queued_first = queued_messages("later_delivery_queue NOT INDEXED", before=False)
    list_queued_before = queued_messages("later_delivery_queue NOT INDEXED", before=True)
    sweep_index = (
        "DELETE FROM later_jobs_index WHERE rowid IN ("
        " SELECT rowid FROM later_jobs_index AS i"
        " WHERE namespace = %(namespace)s AND date_expire IS NOT NULL"
        " AND date_expire <= %(now)s AND NOT EXISTS (SELECT 1 FROM later_storage"
        " WHERE key = %(held_prefix)s || i.job_id || %(held_suffix)s) LIMIT %(limit)s)"
        " RETURNING job_id"
    )
    sweep_records = (
        "DELETE FROM later_storage WHERE key IN (SELECT value FROM json_each(%(keys)s))"
        " AND date_expire_unindexed IS NOT NULL"
    )
    record_transitions = RowsStatement(
        TRANSITIONS_INTO + " VALUES {values}" + TRANSITIONS_CONFLICT,
        row="(%(namespace)s, %(stage)s, %(minute_bucket)s, %(count)s)",
    )
    record_waits = RowsStatement(
        WAITS_INTO + " VALUES {values}" + waits_conflict("MAX"),
        row="(%(namespace)s, %(mode)s, %(minute_bucket)s, %(count)s, %(sum_ms)s, %(max_ms)s)",
    )
    purge_range_prefix = (
        "DELETE FROM later_storage_range WHERE sequence IN ("
        " SELECT sequence FROM later_storage_range"
        " WHERE range_key >= %(start)s AND range_key < %(stop)s LIMIT %(limit)s)"
    )
    # The leftovers' own partial index (migration 0017), named.
    purge_queued_index_rows = (
        "DELETE FROM later_jobs_index WHERE rowid IN ("
        " SELECT rowid FROM later_jobs_index INDEXED BY later_jobs_index_queued_idx"
        " WHERE namespace = %(namespace)s AND stage = 'enqueued' AND topic IS NULL"
        " LIMIT %(limit)s)"
    )
