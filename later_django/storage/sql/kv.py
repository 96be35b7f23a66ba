"""Named SQL of the key-value table (``later_storage``) and ranges (``later_storage_range``).

A row is live while ``date_expire`` is NULL or in the future; every read
filters with ``(date_expire IS NULL OR date_expire > now)``, so an expired row
reads as absent long before the sweep deletes it. ``now`` is always bound as
a parameter (epoch ms), never taken from the database clock, so both vendors
and the Python side agree on what has expired.

A list of keys is bound as one parameter: a JSON array read with ``json_each``
on SQLite, an array compared with ``= ANY`` on PostgreSQL.
"""

from __future__ import annotations

from later_django.storage.db import Statements

_LIVE = "(date_expire IS NULL OR date_expire > %s)"
_EXISTING_EXPIRED = "(later_storage.date_expire IS NOT NULL AND later_storage.date_expire <= %s)"

# The largest BIGINT: the exclusive start of a newest-first walk.
NEWEST_FIRST_START = 9_223_372_036_854_775_807
# Sequences start at 1: the exclusive start of an oldest-first walk.
OLDEST_FIRST_START = 0

_COMMON = {
    # (key, now)
    "get": "SELECT value FROM later_storage WHERE key = %s AND " + _LIVE,
    # (date_expire, key, now): only a live row takes the new expiry.
    "expire": "UPDATE later_storage SET date_expire = %s WHERE key = %s AND " + _LIVE,
    # (key, by, now, now, now, now). An expired row counts as absent: the
    # counter starts again from ``by`` and the stale value and expiry go.
    "increment": (
        "INSERT INTO later_storage "
        "(key, value, counter_value, date_created, date_updated, date_expire) "
        "VALUES (%s, NULL, %s, %s, NULL, NULL) "
        "ON CONFLICT (key) DO UPDATE SET "
        "counter_value = CASE WHEN " + _EXISTING_EXPIRED + " THEN excluded.counter_value "
        "ELSE COALESCE(later_storage.counter_value, 0) + excluded.counter_value END, "
        "value = CASE WHEN " + _EXISTING_EXPIRED + " THEN NULL ELSE later_storage.value END, "
        "date_expire = CASE WHEN " + _EXISTING_EXPIRED + " THEN NULL "
        "ELSE later_storage.date_expire END, "
        "date_updated = excluded.date_created"
    ),
    # (key, value, now, date_expire, now): one statement, so of concurrent
    # callers exactly one sees a row come back (the conflict update re-checks
    # the expiry of the row as it is after any concurrent writer committed).
    "set_if_absent": (
        "INSERT INTO later_storage "
        "(key, value, counter_value, date_created, date_updated, date_expire) "
        "VALUES (%s, %s, NULL, %s, NULL, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value, counter_value = NULL, "
        "date_updated = excluded.date_created, date_expire = excluded.date_expire "
        "WHERE " + _EXISTING_EXPIRED + " "
        "RETURNING 1"
    ),
    # (range_key, value, date_expire, now). Returns no row when the member
    # exists but has expired: the caller then replaces it with a fresh member.
    "range_add": (
        "INSERT INTO later_storage_range (range_key, value, date_expire) VALUES (%s, %s, %s) "
        "ON CONFLICT (range_key, value) DO UPDATE SET date_expire = excluded.date_expire "
        "WHERE later_storage_range.date_expire IS NULL OR later_storage_range.date_expire > %s "
        "RETURNING sequence"
    ),
    # (range_key, value, now)
    "range_remove_expired_member": (
        "DELETE FROM later_storage_range WHERE range_key = %s AND value = %s "
        "AND date_expire IS NOT NULL AND date_expire <= %s"
    ),
    # (range_key, value, date_expire)
    "range_insert": (
        "INSERT INTO later_storage_range (range_key, value, date_expire) VALUES (%s, %s, %s)"
    ),
    # (range_key, value)
    "range_remove": "DELETE FROM later_storage_range WHERE range_key = %s AND value = %s",
    # (range_key)
    "range_clear": "DELETE FROM later_storage_range WHERE range_key = %s",
    # (date_expire, range_key, now): only live members take the new expiry.
    "range_expire": (
        "UPDATE later_storage_range SET date_expire = %s WHERE range_key = %s AND " + _LIVE
    ),
    # (range_key, exclusive cursor, now, limit); walks later_storage_range_key_idx.
    "range_page_oldest_first": (
        "SELECT sequence, value FROM later_storage_range "
        "WHERE range_key = %s AND sequence > %s AND " + _LIVE + " "
        "ORDER BY sequence ASC LIMIT %s"
    ),
    "range_page_newest_first": (
        "SELECT sequence, value FROM later_storage_range "
        "WHERE range_key = %s AND sequence < %s AND " + _LIVE + " "
        "ORDER BY sequence DESC LIMIT %s"
    ),
    # (range_key, now)
    "range_count": "SELECT COUNT(*) FROM later_storage_range WHERE range_key = %s AND " + _LIVE,
    # (start, stop, now, limit): a walk of the primary key between two bounds,
    # so its cost follows the rows it returns, however many keys lie beyond.
    "key_scan": (
        "SELECT key FROM later_storage WHERE key >= %s AND key < %s AND " + _LIVE + " "
        "ORDER BY key LIMIT %s"
    ),
}

# A run of Sets replaces whole entries, counters included; the batch holds
# each key once (ON CONFLICT may not touch a row twice in one statement).
_SET_CONFLICT = (
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value, counter_value = NULL,"
    " date_updated = excluded.date_created, date_expire = excluded.date_expire"
)
_SET_INTO = (
    "INSERT INTO later_storage "
    "(key, value, counter_value, date_created, date_updated, date_expire) "
)

STATEMENTS = Statements(
    _COMMON,
    sqlite={
        # rows of (key, value, now, date_expire)
        "set_many": _SET_INTO + "VALUES {values}" + _SET_CONFLICT,
        "set_many_values": "(%s, %s, NULL, %s, NULL, %s)",
        # (JSON array of keys)
        "delete_many": "DELETE FROM later_storage WHERE key IN (SELECT value FROM json_each(%s))",
        # (JSON array of range keys, now)
        "range_members_many": (
            "SELECT range_key, value FROM later_storage_range "
            "WHERE range_key IN (SELECT value FROM json_each(%s)) AND " + _LIVE + " "
            "ORDER BY range_key, sequence"
        ),
        # (JSON array of keys, now)
        "get_many": (
            "SELECT key, value FROM later_storage "
            "WHERE key IN (SELECT value FROM json_each(%s)) AND " + _LIVE
        ),
    },
    postgresql={
        # (now, keys[], values[], date_expires[]), rows in key order
        "set_many": (
            _SET_INTO + "SELECT batch.key, batch.value, NULL, %s, NULL, batch.date_expire "
            "FROM unnest(%s::varchar[], %s::bytea[], %s::bigint[]) "
            "AS batch(key, value, date_expire) ORDER BY batch.key" + _SET_CONFLICT
        ),
        # (array of keys)
        "delete_many": "DELETE FROM later_storage WHERE key = ANY(%s)",
        # (array of range keys)
        "range_clear_many": "DELETE FROM later_storage_range WHERE range_key = ANY(%s)",
        # (array of range keys, now)
        "range_members_many": (
            "SELECT range_key, value FROM later_storage_range "
            "WHERE range_key = ANY(%s) AND " + _LIVE + " ORDER BY range_key, sequence"
        ),
        # (array of keys, now)
        "get_many_for_update": (
            "SELECT key, value FROM later_storage WHERE key = ANY(%s) AND " + _LIVE + " "
            "ORDER BY key FOR UPDATE"
        ),
        # (array of keys, now)
        "get_many": "SELECT key, value FROM later_storage WHERE key = ANY(%s) AND " + _LIVE,
    },
)
