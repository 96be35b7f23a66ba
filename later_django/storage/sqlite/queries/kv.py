"""SQLite statements of ``later_storage``: lists as JSON arrays, rows as ``VALUES``."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
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
from later_django.storage.sqlite import SqliteDriver

_KEYS = "(SELECT value FROM json_each(%(keys)s))"


@SqliteDriver.register
class SqliteKvQueries(KvQueries):
    get_many = "SELECT key, value FROM later_storage WHERE key IN " + _KEYS + " AND " + LIVE
    # The transaction already holds SQLite's write lock: no row locks to take.
    get_many_for_update = get_many
    delete_many = "DELETE FROM later_storage WHERE key IN " + _KEYS
    range_clear_many = "DELETE FROM later_storage_range WHERE range_key IN " + _KEYS
    range_members_many = (
        "SELECT range_key, value FROM later_storage_range "
        "WHERE range_key IN " + _KEYS + " AND " + LIVE_MEMBER + " ORDER BY range_key, sequence"
    )
    # The transaction holds SQLite's write lock: no row locks to take. ``ranges`` is
    # always empty here: KeyValueStore.decrement_counters clears them first.
    decrement_many = (
        "UPDATE later_storage SET counter_value = counter_value - %(by)s, date_updated = %(now)s "
        "WHERE key IN " + _KEYS + " AND counter_value IS NOT NULL "
        "RETURNING key, counter_value"
    )
    set_many = RowsStatement(
        SET_INTO + "VALUES {values}" + SET_CONFLICT,
        row="(%(key)s, %(value)s, NULL, %(now)s, NULL, %(date_expire)s, %(date_expire_unindexed)s)",
    )
    increment_many = RowsStatement(
        INCREMENT_INTO + "VALUES {values}" + INCREMENT_CONFLICT,
        row="(%(key)s, NULL, %(by)s, %(now)s, NULL, NULL)",
    )
    range_add_many = RowsStatement(
        "INSERT INTO later_storage_range (range_key, value, date_expire) VALUES {values}"
        + RANGE_ADD_CONFLICT,
        row="(%(key)s, %(value)s, %(date_expire)s)",
    )
