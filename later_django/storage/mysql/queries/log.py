"""MySQL/MariaDB statements of retained logs: batches as derived ``SELECT ... UNION
ALL`` rows, lists through ``JSON_TABLE``, and a write then a read where the other
vendors use ``RETURNING``.

The commit's fence is a ``LOCK IN SHARE MODE`` read of the consumer lease at the held
epoch (MariaDB 10.11 has no ``FOR SHARE``), then the ``UPDATE``, in one transaction:
the shared lock holds the lease row until the commit's transaction ends, so a takeover
(which updates the row) waits for it, and a takeover that came first leaves no row at
the old epoch to find.

The deletes (silent members, compaction, cleanup) are :class:`Returning` statements
whose last statement is the ``DELETE``: what comes before reads, without locking,
what the ``DELETE`` needs (session variables), and the ``DELETE``'s row count is the
store's count (``Driver.execute`` returns the last statement's). A ``DELETE`` locks
every row it reads, subqueries included, and waits for rows another transaction
holds, where PostgreSQL's reads a snapshot.
"""

from __future__ import annotations

from later_django.storage.driver import Returning, RowsStatement
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.leases import CONSUMER_LEASES
from later_django.storage.queries.log import BOUNDARY, RECORD_COLUMNS, LogQueries

_UNION = " UNION ALL "
#: A batch's ``(partition_id, count)`` rows: a head that yields no row names the
#: columns, so every row group is the same ``SELECT`` of placeholders.
_ALLOCATED = "(SELECT NULL AS p, NULL AS c FROM DUAL WHERE FALSE" + _UNION + "{values}) AS new"
_GROUP = "namespace = %(namespace)s AND group_name = %(group_name)s AND topic = %(topic)s"
#: The consumer lease of the partition is ``%(owner)s``'s at ``%(epoch)s``.
_HELD = (
    "l.namespace = %(namespace)s AND l.group_name = %(group_name)s AND l.topic = %(topic)s "
    "AND l.partition_id = %(partition_id)s AND l.owner = %(owner)s AND l.epoch = %(epoch)s"
)
_PARTITION = "namespace = %(namespace)s AND topic = %(topic)s AND partition_id = %(partition_id)s"


@MysqlDriver.register
class MysqlLogQueries(LogQueries):
    # The upsert locks the partition rows in partition order (the store sorts them);
    # the read returns the ends they now hold, locked by this transaction until it ends.
    partition_allocate = RowsStatement(
        "INSERT INTO later_log_partition (namespace, topic, partition_id, next_offset) "
        "SELECT %(namespace)s, %(topic)s, new.p, new.c FROM " + _ALLOCATED + " "
        "ON DUPLICATE KEY UPDATE next_offset = later_log_partition.next_offset + new.c",
        row="SELECT %(partition_id)s, %(count)s",
        joiner=_UNION,
        read="SELECT lp.partition_id, lp.next_offset FROM " + _ALLOCATED + " "
        "JOIN later_log_partition AS lp ON lp.namespace = %(namespace)s "
        "AND lp.topic = %(topic)s AND lp.partition_id = new.p ORDER BY lp.partition_id",
    )
    record_insert = RowsStatement(
        "INSERT INTO later_log_record (" + RECORD_COLUMNS + ") VALUES {values}",
        "(%(namespace)s, %(topic)s, %(partition_id)s, %(record_offset)s, %(record_key)s, "
        "%(payload)s, %(appended_at)s)",
    )
    offset_ensure = (
        "INSERT INTO later_log_consumer_offset (namespace, group_name, topic, "
        "partition_id, next_offset, updated_at) SELECT %(namespace)s, %(group_name)s, "
        "%(topic)s, j.v, 0, %(now)s FROM "
        "JSON_TABLE(%(partitions)s, '$[*]' COLUMNS (v BIGINT PATH '$')) AS j "
        "ON DUPLICATE KEY UPDATE partition_id = later_log_consumer_offset.partition_id"
    )
    # Three statements in one transaction: the lease row locked in share mode where it
    # is still the owner's at the epoch, the offset written only then (the UPDATE's
    # own condition: a write runs whatever the read found), and the UPDATE's matched
    # row count (Django connects with CLIENT_FOUND_ROWS: an unchanged offset counts)
    # as the one row the other vendors' RETURNING gives.
    offset_commit = Returning(
        [
            f"SELECT 1 FROM {CONSUMER_LEASES.name} AS l WHERE {_HELD} LOCK IN SHARE MODE",
            "UPDATE later_log_consumer_offset SET next_offset = %(next_offset)s, "
            "updated_at = %(now)s WHERE " + _GROUP + " AND partition_id = %(partition_id)s "
            f"AND EXISTS (SELECT 1 FROM {CONSUMER_LEASES.name} AS l WHERE {_HELD})",
        ],
        "SELECT %(partition_id)s FROM DUAL WHERE ROW_COUNT() > 0",
    )
    member_beat = (
        "INSERT INTO later_log_consumer_member (namespace, group_name, topic, member_id, "
        "joined_at, heartbeat_at) VALUES (%(namespace)s, %(group_name)s, %(topic)s, "
        "%(member_id)s, %(now)s, %(now)s) ON DUPLICATE KEY UPDATE heartbeat_at = %(now)s"
    )
    # A DELETE locks every row it reads, matching or not, and waits for those another
    # transaction holds (unlike UPDATE, no semi-consistent read): the group's silent
    # members are found by a read that locks nothing, then deleted each by its primary
    # key, their silence checked again under the lock (the hints keep the probes: on a
    # small table the planner scanned the members instead). Deleting through the
    # group's index waited on every live member's row, which its heartbeat's
    # transaction holds (the member upsert) while it purges in turn: two heartbeats
    # deadlocked (tests/logs/test_concurrency.py). The DELETE runs last: its row count
    # is the store's count.
    members_purge = Returning(
        [
            "SELECT JSON_ARRAYAGG(id) FROM later_log_consumer_member WHERE " + _GROUP + " "
            "AND heartbeat_at < %(heartbeat_before)s INTO @later_silent_members"
        ],
        "DELETE m FROM JSON_TABLE(@later_silent_members, '$[*]' COLUMNS (id BIGINT PATH '$')) "
        "AS j STRAIGHT_JOIN later_log_consumer_member AS m FORCE INDEX (PRIMARY) "
        "ON m.id = j.id WHERE m.heartbeat_at < %(heartbeat_before)s",
    )
    # One member's row by the group's unique key (its hash of the member id), not a
    # walk of the group's members that would wait on the others' locked rows.
    member_remove = (
        "DELETE FROM later_log_consumer_member WHERE " + _GROUP + " "
        "AND member_hash = UNHEX(SHA2(%(member_id)s, 256)) AND member_id = %(member_id)s"
    )
    # Retention reads its bounds (the groups' lowest offset, the partition's committed
    # end) with a read that locks nothing, into session variables, then deletes: run
    # inside the DELETE, those subqueries lock the offset and partition rows and wait
    # for a commit or an append in flight. The DELETE's own range scan still locks the
    # first record past its end, which is an append's new record when the range
    # reaches the partition's committed end: a retention pass waits for an append in
    # flight on that partition (decision 251). The DELETE runs last: its row count is
    # the store's count. Compaction deletes through a join with the superseded
    # offsets, not ``IN`` a subquery of its own table (MySQL 1093).
    compact = Returning(
        [
            "SELECT " + BOUNDARY + ", COALESCE((SELECT p.next_offset FROM later_log_partition "
            "AS p WHERE p.namespace = %(namespace)s AND p.topic = %(topic)s "
            "AND p.partition_id = %(partition_id)s), 0) "
            "INTO @later_compact_below, @later_compact_end"
        ],
        "DELETE r FROM (SELECT ranked.record_offset FROM ("
        "SELECT record_offset, ROW_NUMBER() OVER (PARTITION BY record_key "
        "ORDER BY record_offset DESC) AS newer FROM later_log_record WHERE " + _PARTITION + " "
        "AND record_offset < @later_compact_end AND record_key IS NOT NULL) AS ranked "
        "WHERE ranked.newer > 1 AND ranked.record_offset < @later_compact_below) AS old "
        "STRAIGHT_JOIN later_log_record AS r FORCE INDEX (PRIMARY) "
        "ON r.namespace = %(namespace)s AND r.topic = %(topic)s "
        "AND r.partition_id = %(partition_id)s AND r.record_offset = old.record_offset",
    )
    cleanup = Returning(
        [
            "SELECT LEAST(" + BOUNDARY + ", COALESCE((SELECT p.next_offset "
            "FROM later_log_partition AS p WHERE p.namespace = %(namespace)s "
            "AND p.topic = %(topic)s AND p.partition_id = %(partition_id)s), 0) "
            "- %(keep_last)s) INTO @later_cleanup_below"
        ],
        "DELETE FROM later_log_record WHERE " + _PARTITION + " "
        "AND record_offset < @later_cleanup_below AND appended_at < %(appended_before)s",
    )
