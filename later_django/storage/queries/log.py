"""Statements of retained logs: records, per-partition offsets, consumer groups.

Tables: ``later_log_partition`` (next offset per partition), ``later_log_record``
(immutable records), ``later_log_consumer_offset`` (a group's next offset per
partition), ``later_log_consumer_member`` (heartbeats); the consumer-group
leases are :data:`~later_django.storage.queries.leases.CONSUMER_LEASES`. A
group is named by ``%(namespace)s, %(group_name)s, %(topic)s`` (the lease
scope), a partition by ``%(partition_id)s``.

The safety boundary of compaction and cleanup is computed inside the ``DELETE``
itself (:data:`BOUNDARY`): the lowest committed offset of any group in the
partition, or, when no group has an offset there, ``%(no_boundary)s`` (the
caller passes a value above every offset).
"""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.queries.leases import CONSUMER_LEASES, held_at_epoch

RECORD_COLUMNS = "namespace, topic, partition_id, record_offset, record_key, payload, appended_at"
PARTITION_CONFLICT = (
    " ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET "
    "next_offset = later_log_partition.next_offset + excluded.next_offset "
    "RETURNING partition_id, next_offset"
)
_WHERE_GROUP = "namespace = %(namespace)s AND group_name = %(group_name)s AND topic = %(topic)s"
_WHERE_PARTITION = (
    "namespace = %(namespace)s AND topic = %(topic)s AND partition_id = %(partition_id)s"
)
BOUNDARY = (
    "COALESCE((SELECT MIN(o.next_offset) FROM later_log_consumer_offset AS o "
    "WHERE o.namespace = %(namespace)s AND o.topic = %(topic)s "
    "AND o.partition_id = %(partition_id)s), %(no_boundary)s)"
)


def fenced_commit(lock: str) -> str:
    """The fenced commit: the group's next offset of the partition changes only if
    the consumer lease row is ``%(owner)s``'s at ``%(epoch)s``; ``lock`` is the
    vendor's row lock of the lease (empty where ``BEGIN IMMEDIATE`` serialises
    writers). ``RETURNING``, as Python's sqlite3 has no rowcount for ``WITH … UPDATE``."""
    return (
        f"WITH fence AS (SELECT 1 FROM {CONSUMER_LEASES.name} "
        f"WHERE {held_at_epoch(CONSUMER_LEASES)}{lock}) "
        "UPDATE later_log_consumer_offset SET next_offset = %(next_offset)s, "
        "updated_at = %(now)s WHERE " + _WHERE_GROUP + " AND partition_id = %(partition_id)s "
        "AND EXISTS (SELECT 1 FROM fence) RETURNING partition_id"
    )


class LogQueries:
    """Retained-log statements; see the module docstring for names and the boundary."""

    record_read = (
        "SELECT record_offset, record_key, payload, appended_at FROM later_log_record "
        "WHERE " + _WHERE_PARTITION + " AND record_offset >= %(from_offset)s "
        "ORDER BY record_offset LIMIT %(limit)s"
    )
    # Records from the group's committed offset (none without an offset row).
    group_read = (
        "SELECT record_offset, record_key, payload, appended_at FROM later_log_record "
        "WHERE record_offset >= (SELECT next_offset FROM later_log_consumer_offset "
        "WHERE " + _WHERE_GROUP + " AND partition_id = %(partition_id)s) "
        "AND " + _WHERE_PARTITION + " ORDER BY record_offset LIMIT %(limit)s"
    )
    partition_ends = (
        "SELECT partition_id, next_offset FROM later_log_partition "
        "WHERE namespace = %(namespace)s AND topic = %(topic)s"
    )
    group_offsets = (
        "SELECT partition_id, next_offset FROM later_log_consumer_offset WHERE " + _WHERE_GROUP
    )
    topic_groups = (
        "SELECT DISTINCT group_name FROM later_log_consumer_offset "
        "WHERE namespace = %(namespace)s AND topic = %(topic)s"
    )
    member_beat = (
        "INSERT INTO later_log_consumer_member (namespace, group_name, topic, member_id, "
        "joined_at, heartbeat_at) VALUES (%(namespace)s, %(group_name)s, %(topic)s, "
        "%(member_id)s, %(now)s, %(now)s) "
        "ON CONFLICT (namespace, group_name, topic, member_id) DO UPDATE SET "
        "heartbeat_at = excluded.heartbeat_at"
    )
    members_live = (
        "SELECT member_id FROM later_log_consumer_member WHERE "
        + _WHERE_GROUP
        + " AND heartbeat_at >= %(heartbeat_since)s"
    )
    member_remove = (
        "DELETE FROM later_log_consumer_member WHERE "
        + _WHERE_GROUP
        + " AND member_id = %(member_id)s"
    )
    # Members silent for long.
    members_purge = (
        "DELETE FROM later_log_consumer_member WHERE "
        + _WHERE_GROUP
        + " AND heartbeat_at < %(heartbeat_before)s"
    )
    # Forgetting a group (its leases: the lease table's rows of the scope).
    group_drop_offsets = "DELETE FROM later_log_consumer_offset WHERE " + _WHERE_GROUP
    group_drop_leases = "DELETE FROM " + CONSUMER_LEASES.name + " WHERE " + _WHERE_GROUP
    group_drop_members = "DELETE FROM later_log_consumer_member WHERE " + _WHERE_GROUP
    # Superseded keyed records below every group's offset (the newest per key is kept).
    compact = (
        "DELETE FROM later_log_record WHERE " + _WHERE_PARTITION + " "
        "AND record_offset < " + BOUNDARY + " AND record_offset IN ("
        "SELECT ranked.record_offset FROM (SELECT record_offset, row_number() OVER ("
        "PARTITION BY record_key ORDER BY record_offset DESC) AS newer "
        "FROM later_log_record WHERE " + _WHERE_PARTITION + " "
        "AND record_key IS NOT NULL) AS ranked WHERE ranked.newer > 1)"
    )
    # Old records outside the newest ``keep_last``, below every group's offset.
    cleanup = (
        "DELETE FROM later_log_record WHERE " + _WHERE_PARTITION + " "
        "AND record_offset < " + BOUNDARY + " AND appended_at < %(appended_before)s "
        "AND record_offset < COALESCE((SELECT p.next_offset FROM later_log_partition AS p "
        "WHERE p.namespace = %(namespace)s AND p.topic = %(topic)s "
        "AND p.partition_id = %(partition_id)s), 0) - %(keep_last)s"
    )

    # Spelled per vendor.
    #: Rows of (partition_id, count) in partition order (so concurrent appenders
    #: lock partition rows in one order); shared namespace, topic. Returns
    #: (partition_id, next_offset) after the raise.
    partition_allocate: RowsStatement
    #: Rows of (partition_id, record_offset, record_key, payload); shared
    #: namespace, topic, appended_at.
    record_insert: RowsStatement
    #: Offset rows at 0 for the partitions of the list ``%(partitions)s`` that lack one.
    offset_ensure: str
    offset_commit: str
