"""SQLite statements of retained logs: batches as multi-row ``VALUES``, lists as
JSON arrays (``json_each``); ``BEGIN IMMEDIATE`` serialises the writers."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.queries.log import (
    PARTITION_CONFLICT,
    RECORD_COLUMNS,
    LogQueries,
    fenced_commit,
)
from later_django.storage.sqlite import SqliteDriver


@SqliteDriver.register
class SqliteLogQueries(LogQueries):
    partition_allocate = RowsStatement(
        "INSERT INTO later_log_partition (namespace, topic, partition_id, next_offset) "
        "VALUES {values}" + PARTITION_CONFLICT,
        "(%(namespace)s, %(topic)s, %(partition_id)s, %(count)s)",
    )
    record_insert = RowsStatement(
        "INSERT INTO later_log_record (" + RECORD_COLUMNS + ") VALUES {values}",
        "(%(namespace)s, %(topic)s, %(partition_id)s, %(record_offset)s, %(record_key)s, "
        "%(payload)s, %(appended_at)s)",
    )
    offset_ensure = (
        "INSERT INTO later_log_consumer_offset (namespace, group_name, topic, "
        "partition_id, next_offset, updated_at) SELECT %(namespace)s, %(group_name)s, "
        "%(topic)s, value, 0, %(now)s FROM json_each(%(partitions)s) WHERE true "
        "ON CONFLICT DO NOTHING"
    )
    offset_commit = fenced_commit("")
