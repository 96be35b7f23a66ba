"""Statements of ``later_storage`` (one row per key) and ``later_storage_range``.

A row is live while its expiry is NULL or later than ``now``: every read filters
with :data:`LIVE` (``later_storage``) or :data:`LIVE_MEMBER`
(``later_storage_range``), so an expired row reads as absent long before the sweep
deletes it. A ``later_storage`` row has two expiry columns and at most one is set:
``date_expire`` (held by the sweep's partial index) and ``date_expire_unindexed``
(a finished job's record: no index holds it, so writing it keeps the update HOT;
the job's index row carries the same expiry and its sweep deletes the record).
"""

from __future__ import annotations

from later_django.storage.driver import RowsStatement

LIVE_MEMBER = "(date_expire IS NULL OR date_expire > %(now)s)"
LIVE = (
    "((date_expire IS NULL OR date_expire > %(now)s) AND "
    "(date_expire_unindexed IS NULL OR date_expire_unindexed > %(now)s))"
)
_EXISTING_EXPIRED = (
    "((later_storage.date_expire IS NOT NULL AND later_storage.date_expire <= %(now)s) OR "
    "(later_storage.date_expire_unindexed IS NOT NULL "
    "AND later_storage.date_expire_unindexed <= %(now)s))"
)

# An Increment (or a run of them, keys distinct): an expired row counts as absent, so
# the counter starts again from ``by`` and the stale value and expiry go.
INCREMENT_INTO = (
    "INSERT INTO later_storage "
    "(key, value, counter_value, date_created, date_updated, date_expire) "
)
INCREMENT_CONFLICT = (
    " ON CONFLICT (key) DO UPDATE SET "
    "counter_value = CASE WHEN " + _EXISTING_EXPIRED + " THEN excluded.counter_value "
    "ELSE COALESCE(later_storage.counter_value, 0) + excluded.counter_value END, "
    "value = CASE WHEN " + _EXISTING_EXPIRED + " THEN NULL ELSE later_storage.value END, "
    "date_expire = CASE WHEN " + _EXISTING_EXPIRED + " THEN NULL "
    "ELSE later_storage.date_expire END, "
    "date_expire_unindexed = CASE WHEN " + _EXISTING_EXPIRED + " THEN NULL "
    "ELSE later_storage.date_expire_unindexed END, "
    "date_updated = excluded.date_created"
)

#: The largest BIGINT: the exclusive start of a newest-first walk.
NEWEST_FIRST_START = 9_223_372_036_854_775_807
#: Sequences start at 1: the exclusive start of an oldest-first walk.
OLDEST_FIRST_START = 0

# A run of Sets replaces whole entries, counters included; the batch holds
# each key once (ON CONFLICT may not touch a row twice in one statement).
SET_INTO = (
    "INSERT INTO later_storage "
    "(key, value, counter_value, date_created, date_updated, date_expire, "
    "date_expire_unindexed) "
)
SET_CONFLICT = (
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value, counter_value = NULL,"
    " date_updated = excluded.date_created, date_expire = excluded.date_expire,"
    " date_expire_unindexed = excluded.date_expire_unindexed"
)


#: A member already present keeps its cursor and takes the new expiry, unless it has
#: expired (then the statement leaves it and returns nothing for it).
RANGE_ADD_CONFLICT = (
    " ON CONFLICT (range_key, value) DO UPDATE SET date_expire = excluded.date_expire "
    "WHERE later_storage_range.date_expire IS NULL "
    "OR later_storage_range.date_expire > %(now)s "
    "RETURNING range_key, value"
)


class KvQueries:
    """Key-value and range statements; see the module docstring for liveness."""

    get = "SELECT value FROM later_storage WHERE key = %(key)s AND " + LIVE
    # Only a live row takes the new expiry.
    expire = (
        "UPDATE later_storage SET date_expire = %(date_expire)s, date_expire_unindexed = NULL "
        "WHERE key = %(key)s AND " + LIVE
    )
    # An expired row counts as absent: the counter starts again from ``by``
    # and the stale value and expiry go.
    increment = (
        INCREMENT_INTO
        + "VALUES (%(key)s, NULL, %(by)s, %(now)s, NULL, NULL)"
        + (INCREMENT_CONFLICT)
    )
    # One statement, so of concurrent callers exactly one sees a row come back
    # (the conflict update re-checks the expiry of the row as it is after any
    # concurrent writer committed).
    # A compare-and-set: of concurrent callers expecting one value, the first to
    # lock the row replaces it; the others re-check it as committed and find no match.
    replace_if = (
        "UPDATE later_storage SET value = %(value)s, counter_value = NULL, "
        "date_updated = %(now)s, date_expire = %(date_expire)s, date_expire_unindexed = NULL "
        "WHERE key = %(key)s AND value = %(expected)s AND " + LIVE + " RETURNING 1"
    )
    set_if_absent = (
        "INSERT INTO later_storage "
        "(key, value, counter_value, date_created, date_updated, date_expire) "
        "VALUES (%(key)s, %(value)s, NULL, %(now)s, NULL, %(date_expire)s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value, counter_value = NULL, "
        "date_updated = excluded.date_created, date_expire = excluded.date_expire, "
        "date_expire_unindexed = NULL "
        "WHERE " + _EXISTING_EXPIRED + " "
        "RETURNING 1"
    )
    # Returns no row when the member exists but has expired: the caller then
    # replaces it with a fresh member.
    range_add = (
        "INSERT INTO later_storage_range (range_key, value, date_expire) "
        "VALUES (%(key)s, %(value)s, %(date_expire)s) "
        "ON CONFLICT (range_key, value) DO UPDATE SET date_expire = excluded.date_expire "
        "WHERE later_storage_range.date_expire IS NULL "
        "OR later_storage_range.date_expire > %(now)s "
        "RETURNING sequence"
    )
    range_remove_expired_member = (
        "DELETE FROM later_storage_range WHERE range_key = %(key)s AND value = %(value)s "
        "AND date_expire IS NOT NULL AND date_expire <= %(now)s"
    )
    range_insert = (
        "INSERT INTO later_storage_range (range_key, value, date_expire) "
        "VALUES (%(key)s, %(value)s, %(date_expire)s)"
    )
    range_remove = "DELETE FROM later_storage_range WHERE range_key = %(key)s AND value = %(value)s"
    range_clear = "DELETE FROM later_storage_range WHERE range_key = %(key)s"
    # Only live members take the new expiry.
    range_expire = (
        "UPDATE later_storage_range SET date_expire = %(date_expire)s "
        "WHERE range_key = %(key)s AND " + LIVE_MEMBER
    )
    # Both walk later_storage_range_key_idx from the exclusive cursor.
    range_page_oldest_first = (
        "SELECT sequence, value FROM later_storage_range "
        "WHERE range_key = %(key)s AND sequence > %(cursor)s AND " + LIVE_MEMBER + " "
        "ORDER BY sequence ASC LIMIT %(limit)s"
    )
    range_page_newest_first = (
        "SELECT sequence, value FROM later_storage_range "
        "WHERE range_key = %(key)s AND sequence < %(cursor)s AND " + LIVE_MEMBER + " "
        "ORDER BY sequence DESC LIMIT %(limit)s"
    )
    range_count = (
        "SELECT COUNT(*) FROM later_storage_range WHERE range_key = %(key)s AND " + LIVE_MEMBER
    )
    # A walk of the primary key between two bounds, so its cost follows the
    # rows it returns, however many keys lie beyond.
    key_scan = (
        "SELECT key FROM later_storage WHERE key >= %(start)s AND key < %(stop)s AND "
        + LIVE
        + " ORDER BY key LIMIT %(limit)s"
    )
    key_scan_reverse = (
        "SELECT key FROM later_storage WHERE key >= %(start)s AND key < %(stop)s AND "
        + LIVE
        + " ORDER BY key DESC LIMIT %(limit)s"
    )
    counter_scan = (
        "SELECT key, counter_value FROM later_storage WHERE key >= %(start)s AND "
        "key < %(stop)s AND counter_value IS NOT NULL AND " + LIVE + " ORDER BY key LIMIT %(limit)s"
    )

    # Spelled per vendor. Lists (``keys``) are one bound parameter.
    get_many: str
    #: ``get_many`` that locks the rows until the transaction ends, in key order.
    get_many_for_update: str
    delete_many: str
    range_clear_many: str
    range_members_many: str
    #: Subtracts ``by`` from the counters of ``keys`` (rows with a counter only),
    #: returning ``(key, counter_value)``; PostgreSQL locks the rows in key order first
    #: and empties the ranges ``ranges`` in the same statement.
    decrement_many: str
    #: The rows of children ranges (live or not: ``(kind, range_key, value, sequence,
    #: NULL)``, kind 0 a live member, 2 an expired one) and the counters their live
    #: marked members name decremented (``(1, key, NULL, NULL, counter)``), in one
    #: statement; None where the store composes it of ``range_members_many`` and
    #: ``decrement_counters`` (SQLite). The caller empties the ranges by
    #: ``range_rows_delete``.
    read_ranges_decrementing: str | None = None
    #: Deletes the range rows whose ``sequence`` is in the list ``sequences``.
    range_rows_delete: str | None = None
    #: Rows of (key, value, date_expire, date_expire_unindexed), shared ``now``; keys
    #: distinct, in key order.
    set_many: RowsStatement
    #: Rows of (key, value, date_expire), shared ``now``, members distinct: ``range_add``
    #: of each, inserted in row order, returning ``(range_key, value)`` of the members
    #: added or kept (not those left expired).
    range_add_many: RowsStatement
    #: Rows of (key, by), shared ``now``, keys distinct, in key order: ``increment``
    #: of each.
    increment_many: RowsStatement
