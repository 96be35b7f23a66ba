"""MySQL/MariaDB statements of ``later_storage``: lists through ``JSON_TABLE``, rows as
derived ``SELECT ... UNION ALL`` groups, and a write then a read where the other
vendors use ``RETURNING``.

``key`` is a reserved word: every statement naming the column quotes it. An upsert
is ``ON DUPLICATE KEY UPDATE`` (no ``AS new`` row alias: MariaDB refuses it, and
``VALUES(col)`` is deprecated on MySQL 8.0.20+), whose assignments run left to
right, each seeing the columns already assigned: the columns a condition reads are
assigned after the ones the condition decides. ``later_storage_range`` is unique on
``(range_key, value_hash)``, ``value_hash`` being ``UNHEX(SHA2(value, 256))``
(migration 0019).
"""

from __future__ import annotations

from later_django.storage.driver import Returning, RowsStatement
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.kv import LIVE, LIVE_MEMBER, KvQueries

#: The keys of the JSON array ``%(keys)s`` as the rows of ``j.v``, compared byte by
#: byte as the ``utf8mb4_bin`` key columns are.
_KEYS_TABLE = (
    "JSON_TABLE(%(keys)s, '$[*]' COLUMNS (v VARCHAR(500) COLLATE utf8mb4_bin PATH '$')) AS j"
)
_KEYS = "(SELECT v FROM " + _KEYS_TABLE + ")"
#: The rows of the keys, one probe of the index each, the order and the index written
#: out (decision 263): left to itself, MariaDB reads a table of a few rows in full
#: (its estimate of a ``JSON_TABLE`` is 40 rows), and a locking read or a write then
#: locks, and waits for, every row it read.
_STORAGE_OF_KEYS = (
    _KEYS_TABLE + " STRAIGHT_JOIN later_storage AS s FORCE INDEX (PRIMARY) ON s.`key` = j.v"
)
_RANGES_OF_KEYS = (
    _KEYS_TABLE + " STRAIGHT_JOIN later_storage_range AS r "
    "FORCE INDEX (later_storage_range_key_idx) ON r.range_key = j.v"
)
#: The row as stored (``ON DUPLICATE KEY UPDATE`` names the existing row so) has expired.
_EXPIRED = (
    "((later_storage.date_expire IS NOT NULL AND later_storage.date_expire <= %(now)s) OR "
    "(later_storage.date_expire_unindexed IS NOT NULL "
    "AND later_storage.date_expire_unindexed <= %(now)s))"
)
_UNION = " UNION ALL "

INCREMENT_INTO = (
    "INSERT INTO later_storage "
    "(`key`, value, counter_value, date_created, date_updated, date_expire) "
)


def _increment_conflict(by: str) -> str:
    """The conflict update of an increment by ``by`` (an expression). Expiry columns
    last: the condition reads them. At most one of the two is set, so clearing
    ``date_expire`` first cannot hide an expired ``date_expire_unindexed``."""
    return (
        " ON DUPLICATE KEY UPDATE "
        "counter_value = IF(" + _EXPIRED + ", " + by + ", "
        "COALESCE(later_storage.counter_value, 0) + " + by + "), "
        "value = IF(" + _EXPIRED + ", NULL, later_storage.value), "
        "date_updated = %(now)s, "
        "date_expire = IF(" + _EXPIRED + ", NULL, later_storage.date_expire), "
        "date_expire_unindexed = IF(" + _EXPIRED + ", NULL, later_storage.date_expire_unindexed)"
    )


def _derived(*columns: str) -> str:
    """The rows of a batch, named: a head that yields no row names the columns, so
    every row group is the same ``SELECT`` of placeholders. ``v`` (a value) is typed
    binary there: mysqlclient binds bytes as plain string literals, which a ``UNION``
    column of the connection's character set would re-encode (``\xff`` read ``?``)."""
    head = ", ".join(
        f"CAST(NULL AS BINARY) AS {column}" if column == "v" else f"NULL AS {column}"
        for column in columns
    )
    return "(SELECT " + head + " FROM DUAL WHERE FALSE" + _UNION + "{values}) AS new"


_MEMBER_ROWS = _derived("k", "v", "e")
_MEMBER_ROW = "SELECT %(key)s, %(value)s, %(date_expire)s"
_MEMBER_OF_ROW = "r.range_key = new.k AND r.value_hash = UNHEX(SHA2(new.v, 256))"


@MysqlDriver.register
class MysqlKvQueries(KvQueries):
    get = "SELECT value FROM later_storage WHERE `key` = %(key)s AND " + LIVE
    expire = (
        "UPDATE later_storage SET date_expire = %(date_expire)s, date_expire_unindexed = NULL "
        "WHERE `key` = %(key)s AND " + LIVE
    )
    increment = (
        INCREMENT_INTO
        + "VALUES (%(key)s, NULL, %(by)s, %(now)s, NULL, NULL)"
        + _increment_conflict("%(by)s")
    )
    # The UPDATE's matched rows (Django connects with CLIENT_FOUND_ROWS: a row
    # replaced by the same value counts) are the answer. The row lock makes
    # concurrent callers wait, then re-check the committed value.
    replace_if = Returning(
        [
            "UPDATE later_storage SET value = %(value)s, counter_value = NULL, "
            "date_updated = %(now)s, date_expire = %(date_expire)s, "
            "date_expire_unindexed = NULL "
            "WHERE `key` = %(key)s AND value = %(expected)s AND " + LIVE
        ],
        "SELECT 1 FROM DUAL WHERE ROW_COUNT() > 0",
    )
    # One statement, whose outcome it leaves in LAST_INSERT_ID(): 1 when it inserted
    # the row (the inserted row sets it) or replaced an expired one, 0 when a live row
    # stays (the conflict update's first assignment decides, once, for the others).
    set_if_absent = Returning(
        [
            "INSERT INTO later_storage "
            "(`key`, value, counter_value, date_created, date_updated, date_expire) "
            "VALUES (%(key)s, %(value)s, NULLIF(LAST_INSERT_ID(1), 1), %(now)s, NULL, "
            "%(date_expire)s) "
            "ON DUPLICATE KEY UPDATE "
            "counter_value = IF(LAST_INSERT_ID(" + _EXPIRED + "), NULL, "
            "later_storage.counter_value), "
            "value = IF(LAST_INSERT_ID(), %(value)s, later_storage.value), "
            "date_updated = IF(LAST_INSERT_ID(), %(now)s, later_storage.date_updated), "
            "date_expire = IF(LAST_INSERT_ID(), %(date_expire)s, later_storage.date_expire), "
            "date_expire_unindexed = IF(LAST_INSERT_ID(), NULL, "
            "later_storage.date_expire_unindexed)"
        ],
        "SELECT 1 FROM DUAL WHERE LAST_INSERT_ID() = 1",
    )
    # An expired member goes first, so the upsert only ever keeps a live one (which
    # keeps its cursor and takes the new expiry): always a row to return.
    range_add = Returning(
        [
            KvQueries.range_remove_expired_member,
            "INSERT INTO later_storage_range (range_key, value, date_expire) "
            "VALUES (%(key)s, %(value)s, %(date_expire)s) "
            "ON DUPLICATE KEY UPDATE date_expire = %(date_expire)s",
        ],
        "SELECT 1 FROM DUAL",
    )
    key_scan = (
        "SELECT `key` FROM later_storage WHERE `key` >= %(start)s AND `key` < %(stop)s AND "
        + LIVE
        + " ORDER BY `key` LIMIT %(limit)s"
    )
    key_scan_reverse = (
        "SELECT `key` FROM later_storage WHERE `key` >= %(start)s AND `key` < %(stop)s AND "
        + LIVE
        + " ORDER BY `key` DESC LIMIT %(limit)s"
    )
    counter_scan = (
        "SELECT `key`, counter_value FROM later_storage WHERE `key` >= %(start)s AND "
        "`key` < %(stop)s AND counter_value IS NOT NULL AND "
        + LIVE
        + " ORDER BY `key` LIMIT %(limit)s"
    )

    # Lists: a semi-join on the primary key for reads that lock nothing; the keys'
    # rows probed one by one (``_STORAGE_OF_KEYS``) for what locks: a multi-table
    # DELETE/UPDATE (``IN (SELECT ... JSON_TABLE)`` in a DELETE scans the whole table
    # on MariaDB 10.11) and the locking read.
    get_many = "SELECT `key`, value FROM later_storage WHERE `key` IN " + _KEYS + " AND " + LIVE
    # READ COMMITTED takes no gap locks: the rows found are locked, in key order (the
    # store's keys are sorted and distinct).
    get_many_for_update = (
        "SELECT s.`key`, s.value FROM " + _STORAGE_OF_KEYS + " WHERE " + LIVE + " "
        "ORDER BY s.`key` FOR UPDATE"
    )
    delete_many = "DELETE s FROM " + _STORAGE_OF_KEYS
    range_clear_many = "DELETE r FROM " + _RANGES_OF_KEYS
    range_members_many = (
        "SELECT range_key, value FROM later_storage_range "
        "WHERE range_key IN " + _KEYS + " AND " + LIVE_MEMBER + " ORDER BY range_key, sequence"
    )
    # The UPDATE locks the rows (JSON_TABLE drives the join: key order, as the store
    # sorts the keys), then the read returns what it left. ``ranges`` is always
    # empty: combines_statements is False, so the store clears them first.
    decrement_many = Returning(
        [
            "UPDATE " + _STORAGE_OF_KEYS + " "
            "SET s.counter_value = s.counter_value - %(by)s, s.date_updated = %(now)s "
            "WHERE s.counter_value IS NOT NULL"
        ],
        "SELECT `key`, counter_value FROM later_storage "
        "WHERE `key` IN " + _KEYS + " AND counter_value IS NOT NULL",
    )
    set_many = RowsStatement(
        "INSERT INTO later_storage "
        "(`key`, value, counter_value, date_created, date_updated, date_expire, "
        "date_expire_unindexed) "
        "SELECT new.k, new.v, NULL, %(now)s, NULL, new.e, new.eu FROM "
        + _derived("k", "v", "e", "eu")
        + " ON DUPLICATE KEY UPDATE value = new.v, counter_value = NULL, "
        "date_updated = %(now)s, date_expire = new.e, date_expire_unindexed = new.eu",
        row="SELECT %(key)s, %(value)s, %(date_expire)s, %(date_expire_unindexed)s",
        joiner=_UNION,
    )
    increment_many = RowsStatement(
        INCREMENT_INTO
        + "SELECT new.k, NULL, new.b, %(now)s, NULL, NULL FROM "
        + _derived("k", "b")
        + _increment_conflict("new.b"),
        row="SELECT %(key)s, %(by)s",
        joiner=_UNION,
    )
    # Expired members of the batch go first; the upsert then adds or keeps every
    # member, in row order, and the read returns those now stored.
    range_add_many = RowsStatement(
        "INSERT INTO later_storage_range (range_key, value, date_expire) "
        "SELECT new.k, new.v, new.e FROM " + _MEMBER_ROWS + " "
        "ON DUPLICATE KEY UPDATE date_expire = new.e",
        row=_MEMBER_ROW,
        joiner=_UNION,
        before="DELETE r FROM " + _MEMBER_ROWS + " JOIN later_storage_range AS r "
        "ON " + _MEMBER_OF_ROW + " "
        "WHERE r.date_expire IS NOT NULL AND r.date_expire <= %(now)s",
        read="SELECT r.range_key, r.value FROM " + _MEMBER_ROWS + " JOIN later_storage_range AS r "
        "ON " + _MEMBER_OF_ROW + " AND r.value = new.v",
    )
