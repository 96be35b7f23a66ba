"""PostgreSQL statements of retained logs: batches as arrays (``unnest``), the
commit's fence holding the lease row ``FOR SHARE``."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.log import (
    PARTITION_CONFLICT,
    RECORD_COLUMNS,
    LogQueries,
    fenced_commit,
)


@PostgresDriver.register
class PostgresLogQueries(LogQueries):
    partition_allocate = RowsStatement(
        "INSERT INTO later_log_partition (namespace, topic, partition_id, next_offset) "
        "SELECT %(namespace)s, %(topic)s, batch.partition_id, batch.count "
        "FROM unnest(%(partition_id)s::int[], %(count)s::bigint[]) AS batch (partition_id, count) "
        "ORDER BY batch.partition_id" + PARTITION_CONFLICT
    )
    record_insert = RowsStatement(
        "INSERT INTO later_log_record (" + RECORD_COLUMNS + ") "
        "SELECT %(namespace)s, %(topic)s, batch.partition_id, batch.record_offset, "
        "batch.record_key, batch.payload, %(appended_at)s FROM unnest(%(partition_id)s::int[], "
        "%(record_offset)s::bigint[], %(record_key)s::bytea[], %(payload)s::bytea[]) "
        "AS batch (partition_id, record_offset, record_key, payload)"
    )
    offset_ensure = (
        "INSERT INTO later_log_consumer_offset (namespace, group_name, topic, "
        "partition_id, next_offset, updated_at) SELECT %(namespace)s, %(group_name)s, "
        "%(topic)s, ids.id, 0, %(now)s FROM unnest(%(partitions)s::int[]) AS ids (id) "
        "ON CONFLICT DO NOTHING"
    )
    # FOR SHARE holds the lease row until the commit's transaction ends: a takeover
    # waits for it, and a takeover that came first makes the fence find no row.
    offset_commit = fenced_commit(" FOR SHARE")
