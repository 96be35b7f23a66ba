"""Named SQL of retained logs: records, per-partition offsets, consumer groups.

Tables: ``later_log_partition`` (next offset per partition), ``later_log_record``
(immutable records), ``later_log_consumer_offset`` (a group's next offset per
partition), ``later_log_consumer_member`` (heartbeats), ``later_log_consumer_lease``
(fenced partition claims). Lists are bound as one parameter (JSON array on
SQLite, array on PostgreSQL). Every lease write names its owner; a commit names
owner and epoch, so zero rows changed means the lease is gone.

The safety boundary of compaction and cleanup is computed inside the ``DELETE``
itself (``_BOUNDARY``): the lowest committed offset of any group in the
partition, or, when no group has an offset there, ``%s`` (the caller passes the
largest offset value: everything is below it).
"""

from __future__ import annotations

from later_django.storage.db import Statements

_RECORD_COLUMNS = "namespace, topic, partition_id, record_offset, record_key, payload, appended_at"
_PARTITION_CONFLICT = (
    " ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET "
    "next_offset = later_log_partition.next_offset + excluded.next_offset "
    "RETURNING partition_id, next_offset"
)
_WHERE_GROUP = "namespace = %s AND group_name = %s AND topic = %s"
# (namespace, topic, partition_id, no-group fallback)
_BOUNDARY = (
    "COALESCE((SELECT MIN(o.next_offset) FROM later_log_consumer_offset AS o "
    "WHERE o.namespace = %s AND o.topic = %s AND o.partition_id = %s), %s)"
)

# (wanted, owner, wanted, lease_until, wanted, owner, namespace, group, topic, owner,
#  wanted, now): one statement, so concurrent rebalances lock lease rows in key order.
# The owner's rows outside ``wanted`` are released (epoch kept); rows in ``wanted``
# that are the owner's are renewed, free or lapsed ones taken (epoch + 1 when taken).
_REBALANCE = (
    "UPDATE later_log_consumer_lease SET "
    "owner = CASE WHEN partition_id IN {wanted} THEN %s ELSE NULL END, "
    "lease_until = CASE WHEN partition_id IN {wanted} THEN %s ELSE 0 END, "
    "epoch = CASE WHEN partition_id IN {wanted} AND (owner IS NULL OR owner <> %s) "
    "THEN epoch + 1 ELSE epoch END "
    "WHERE " + _WHERE_GROUP + " AND (owner = %s OR ("
    "partition_id IN {wanted} AND (owner IS NULL OR lease_until < %s))) "
    "RETURNING partition_id, owner, epoch"
)

LOG_SQL = Statements(
    {
        # (namespace, topic, partition_id, from_offset, limit)
        "record_read": (
            "SELECT record_offset, record_key, payload, appended_at FROM later_log_record "
            "WHERE namespace = %s AND topic = %s AND partition_id = %s "
            "AND record_offset >= %s ORDER BY record_offset LIMIT %s"
        ),
        # (namespace, group, topic, partition_id, namespace, topic, partition_id, limit):
        # records from the group's committed offset
        "group_read": (
            "SELECT record_offset, record_key, payload, appended_at FROM later_log_record "
            "WHERE record_offset >= (SELECT next_offset FROM later_log_consumer_offset "
            "WHERE namespace = %s AND group_name = %s AND topic = %s AND partition_id = %s) "
            "AND namespace = %s AND topic = %s AND partition_id = %s "
            "ORDER BY record_offset LIMIT %s"
        ),
        # (namespace, topic)
        "partition_ends": (
            "SELECT partition_id, next_offset FROM later_log_partition "
            "WHERE namespace = %s AND topic = %s"
        ),
        # (namespace, group, topic)
        "group_offsets": (
            "SELECT partition_id, next_offset FROM later_log_consumer_offset WHERE " + _WHERE_GROUP
        ),
        # (namespace, topic)
        "topic_groups": (
            "SELECT DISTINCT group_name FROM later_log_consumer_offset "
            "WHERE namespace = %s AND topic = %s"
        ),
        # (namespace, group, topic, member_id, joined_at, heartbeat_at)
        "member_beat": (
            "INSERT INTO later_log_consumer_member (namespace, group_name, topic, member_id, "
            "joined_at, heartbeat_at) VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (namespace, group_name, topic, member_id) DO UPDATE SET "
            "heartbeat_at = excluded.heartbeat_at"
        ),
        # (namespace, group, topic, heartbeat_at_or_after)
        "members_live": (
            "SELECT member_id FROM later_log_consumer_member WHERE "
            + _WHERE_GROUP
            + " AND heartbeat_at >= %s"
        ),
        # (namespace, group, topic, member_id)
        "member_remove": (
            "DELETE FROM later_log_consumer_member WHERE " + _WHERE_GROUP + " AND member_id = %s"
        ),
        # (namespace, group, topic, heartbeat_before): members silent for long
        "members_purge": (
            "DELETE FROM later_log_consumer_member WHERE " + _WHERE_GROUP + " AND heartbeat_at < %s"
        ),
        # (namespace, group, topic)
        "lease_state": (
            "SELECT partition_id, owner, lease_until, epoch FROM later_log_consumer_lease "
            "WHERE " + _WHERE_GROUP + " ORDER BY partition_id"
        ),
        # (namespace, group, topic, owner): leave
        "lease_release_all": (
            "UPDATE later_log_consumer_lease SET owner = NULL, lease_until = 0 "
            "WHERE " + _WHERE_GROUP + " AND owner = %s"
        ),
        # (namespace, group, topic): forget a group
        "group_drop_offsets": (
            "DELETE FROM later_log_consumer_offset WHERE namespace = %s AND group_name = %s "
            "AND topic = %s"
        ),
        "group_drop_leases": (
            "DELETE FROM later_log_consumer_lease WHERE namespace = %s AND group_name = %s "
            "AND topic = %s"
        ),
        "group_drop_members": (
            "DELETE FROM later_log_consumer_member WHERE namespace = %s AND group_name = %s "
            "AND topic = %s"
        ),
        # (namespace, topic, partition_id, <_BOUNDARY params>, namespace, topic, partition_id):
        # superseded keyed records below every group's offset (newest per key is kept)
        "compact": (
            "DELETE FROM later_log_record WHERE namespace = %s AND topic = %s "
            "AND partition_id = %s AND record_offset < " + _BOUNDARY + " AND record_offset IN ("
            "SELECT ranked.record_offset FROM (SELECT record_offset, row_number() OVER ("
            "PARTITION BY record_key ORDER BY record_offset DESC) AS newer "
            "FROM later_log_record WHERE namespace = %s AND topic = %s AND partition_id = %s "
            "AND record_key IS NOT NULL) AS ranked WHERE ranked.newer > 1)"
        ),
        # (namespace, topic, partition_id, <_BOUNDARY params>, appended_before,
        #  namespace, topic, partition_id, keep_last)
        "cleanup": (
            "DELETE FROM later_log_record WHERE namespace = %s AND topic = %s "
            "AND partition_id = %s AND record_offset < " + _BOUNDARY + " AND appended_at < %s "
            "AND record_offset < COALESCE((SELECT p.next_offset FROM later_log_partition AS p "
            "WHERE p.namespace = %s AND p.topic = %s AND p.partition_id = %s), 0) - %s"
        ),
    },
    sqlite={
        # rows of (namespace, topic, partition_id, count), partition order
        "partition_allocate": (
            "INSERT INTO later_log_partition (namespace, topic, partition_id, next_offset) "
            "VALUES {values}" + _PARTITION_CONFLICT
        ),
        "partition_allocate_values": "(%s, %s, %s, %s)",
        # rows of the record columns
        "record_insert": ("INSERT INTO later_log_record (" + _RECORD_COLUMNS + ") VALUES {values}"),
        "record_insert_values": "(%s, %s, %s, %s, %s, %s, %s)",
        # (namespace, group, topic, JSON partition ids)
        "lease_ensure": (
            "INSERT INTO later_log_consumer_lease (namespace, group_name, topic, partition_id, "
            "owner, lease_until, epoch) SELECT %s, %s, %s, value, NULL, 0, 0 "
            "FROM json_each(%s) WHERE true ON CONFLICT DO NOTHING"
        ),
        # (namespace, group, topic, updated_at, JSON partition ids)
        "offset_ensure": (
            "INSERT INTO later_log_consumer_offset (namespace, group_name, topic, "
            "partition_id, next_offset, updated_at) SELECT %s, %s, %s, value, 0, %s "
            "FROM json_each(%s) WHERE true ON CONFLICT DO NOTHING"
        ),
        "lease_rebalance": _REBALANCE.format(wanted="(SELECT value FROM json_each(%s))"),
        # (namespace, group, topic, partition_id, owner, epoch, offset, updated_at,
        #  namespace, group, topic, partition_id); BEGIN IMMEDIATE serialises
        #  writers; RETURNING, as Python's sqlite3 has no rowcount for WITH … UPDATE
        "offset_commit": (
            "WITH fence AS (SELECT 1 FROM later_log_consumer_lease WHERE " + _WHERE_GROUP + " "
            "AND partition_id = %s AND owner = %s AND epoch = %s) "
            "UPDATE later_log_consumer_offset SET next_offset = %s, updated_at = %s "
            "WHERE " + _WHERE_GROUP + " AND partition_id = %s AND EXISTS (SELECT 1 FROM fence) "
            "RETURNING partition_id"
        ),
    },
    postgresql={
        # (namespace, topic, partition_ids[], counts[]), partition order (row lock order)
        "partition_allocate": (
            "INSERT INTO later_log_partition (namespace, topic, partition_id, next_offset) "
            "SELECT %s, %s, batch.partition_id, batch.count "
            "FROM unnest(%s::int[], %s::bigint[]) AS batch (partition_id, count) "
            "ORDER BY batch.partition_id" + _PARTITION_CONFLICT
        ),
        # (namespace, topic, appended_at, partition_ids[], offsets[], keys[], payloads[])
        "record_insert": (
            "INSERT INTO later_log_record (" + _RECORD_COLUMNS + ") "
            "SELECT %s, %s, batch.partition_id, batch.record_offset, batch.record_key, "
            "batch.payload, %s FROM unnest(%s::int[], %s::bigint[], %s::bytea[], %s::bytea[]) "
            "AS batch (partition_id, record_offset, record_key, payload)"
        ),
        "lease_ensure": (
            "INSERT INTO later_log_consumer_lease (namespace, group_name, topic, partition_id, "
            "owner, lease_until, epoch) SELECT %s, %s, %s, ids.id, NULL, 0, 0 "
            "FROM unnest(%s::int[]) AS ids (id) ON CONFLICT DO NOTHING"
        ),
        "offset_ensure": (
            "INSERT INTO later_log_consumer_offset (namespace, group_name, topic, "
            "partition_id, next_offset, updated_at) SELECT %s, %s, %s, ids.id, 0, %s "
            "FROM unnest(%s::int[]) AS ids (id) ON CONFLICT DO NOTHING"
        ),
        "lease_rebalance": _REBALANCE.format(wanted="(SELECT unnest(%s::int[]))"),
        # FOR SHARE holds the lease row until the commit's transaction ends: a takeover
        # waits for it, and a takeover that came first makes the fence find no row.
        "offset_commit": (
            "WITH fence AS (SELECT 1 FROM later_log_consumer_lease WHERE " + _WHERE_GROUP + " "
            "AND partition_id = %s AND owner = %s AND epoch = %s FOR SHARE) "
            "UPDATE later_log_consumer_offset SET next_offset = %s, updated_at = %s "
            "WHERE " + _WHERE_GROUP + " AND partition_id = %s AND EXISTS (SELECT 1 FROM fence) "
            "RETURNING partition_id"
        ),
    },
)
