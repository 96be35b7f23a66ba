"""SQLite partition statements: one partition or row per statement, lists as JSON."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.queries.partitions import (
    CLAIM_FROM,
    CLAIM_ORDER,
    HEAD_COLUMNS,
    PartitionQueries,
)
from later_django.storage.sqlite import SqliteDriver

_STAGE_FROM_INDEX = (
    "SELECT j.namespace, j.topic, j.partition_id, j.sequence, j.job_id, "
    "j.earliest_run_at, COALESCE(i.stage, 'enqueued') FROM later_partition_job AS j "
    "LEFT JOIN later_jobs_index AS i ON i.namespace = %(namespace)s AND i.job_id = j.job_id "
    "WHERE j.namespace = %(namespace)s AND j.topic = %(topic)s "
    "AND j.partition_id = %(partition_id)s "
)


@SqliteDriver.register
class SqlitePartitionQueries(PartitionQueries):
    batched = False
    # The topic must be registered with that partition count, else no row comes back.
    sequence_allocate = (
        "INSERT INTO later_partition_sequence (namespace, topic, partition_id, next_sequence) "
        "SELECT namespace, topic, %(partition_id)s, %(taken)s + 1 FROM later_topic "
        "WHERE namespace = %(namespace)s AND topic = %(topic)s AND partitions = %(partitions)s "
        "ON CONFLICT (namespace, topic, partition_id) DO UPDATE "
        "SET next_sequence = next_sequence + excluded.next_sequence - 1 "
        "RETURNING next_sequence"
    )
    jobs_insert = RowsStatement(
        "INSERT INTO later_partition_job (namespace, topic, partition_id, sequence, job_id, "
        "earliest_run_at) VALUES {values}",
        row=(
            "(%(namespace)s, %(topic)s, %(partition_id)s, %(sequence)s, %(job_id)s, "
            "%(earliest_run_at)s)"
        ),
    )
    head_insert_if_absent = (
        f"INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
        "VALUES (%(namespace)s, %(topic)s, %(partition_id)s, %(sequence)s, %(job_id)s, "
        "%(earliest_run_at)s, %(stage)s) "
        "ON CONFLICT (namespace, topic, partition_id) DO NOTHING"
    )
    jobs_delete = (
        "DELETE FROM later_partition_job WHERE namespace = %(namespace)s "
        "AND job_id IN (SELECT value FROM json_each(%(exits)s))"
    )
    job_run_at = (
        "UPDATE later_partition_job SET earliest_run_at = %(at)s "
        "WHERE namespace = %(namespace)s AND job_id = %(job_id)s"
    )
    # Each named partition's lowest row, with its job's stage from the index, becomes
    # its head (the partitions: a JSON array of [topic, partition_id]).
    head_recompute = (
        f"INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
        "SELECT j.namespace, j.topic, j.partition_id, j.sequence, j.job_id, "
        "j.earliest_run_at, COALESCE(i.stage, 'enqueued') FROM json_each(%(partitions)s) AS p "
        "JOIN later_partition_job AS j ON j.rowid = (SELECT k.rowid FROM later_partition_job AS k "
        "WHERE k.namespace = %(namespace)s AND k.topic = json_extract(p.value, '$[0]') "
        "AND k.partition_id = json_extract(p.value, '$[1]') ORDER BY k.sequence LIMIT 1) "
        "LEFT JOIN later_jobs_index AS i ON i.namespace = %(namespace)s AND i.job_id = j.job_id "
        "WHERE true ORDER BY p.key "
        "ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET "
        "sequence = excluded.sequence, job_id = excluded.job_id, "
        "earliest_run_at = excluded.earliest_run_at, stage = excluded.stage"
    )
    # Each named partition's lowest row but the exits, with index stage and record,
    # in the order the partitions are named.
    next_rows = (
        "SELECT j.topic, j.partition_id, j.sequence, j.job_id, COALESCE(i.stage, 'enqueued'), "
        "j.earliest_run_at, s.value FROM json_each(%(partitions)s) AS p "
        "JOIN later_partition_job AS j ON j.rowid = (SELECT k.rowid FROM later_partition_job AS k "
        "WHERE k.namespace = %(namespace)s AND k.topic = json_extract(p.value, '$[0]') "
        "AND k.partition_id = json_extract(p.value, '$[1]') "
        "AND k.job_id NOT IN (SELECT value FROM json_each(%(exits)s)) "
        "ORDER BY k.sequence LIMIT 1) "
        "LEFT JOIN later_jobs_index AS i ON i.namespace = %(namespace)s AND i.job_id = j.job_id "
        "LEFT JOIN later_storage AS s ON s.key = %(prefix)s || j.job_id "
        "AND (s.date_expire IS NULL OR s.date_expire > %(now)s) "
        "ORDER BY p.key"
    )
    heads_materialize = (
        f"INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
        + _STAGE_FROM_INDEX
        + "AND NOT EXISTS (SELECT 1 FROM later_partition_head AS h "
        "WHERE h.namespace = %(namespace)s AND h.topic = %(topic)s "
        "AND h.partition_id = %(partition_id)s) ORDER BY j.sequence LIMIT 1 "
        "ON CONFLICT (namespace, topic, partition_id) DO NOTHING"
    )
    # The heads of the named partitions that have no row left.
    head_delete_if_empty = (
        "DELETE FROM later_partition_head WHERE namespace = %(namespace)s "
        "AND EXISTS (SELECT 1 FROM json_each(%(partitions)s) AS p "
        "WHERE json_extract(p.value, '$[0]') = later_partition_head.topic "
        "AND json_extract(p.value, '$[1]') = later_partition_head.partition_id) "
        "AND NOT EXISTS (SELECT 1 FROM later_partition_job AS j "
        "WHERE j.namespace = %(namespace)s AND j.topic = later_partition_head.topic "
        "AND j.partition_id = later_partition_head.partition_id)"
    )
    heads_claim = (
        CLAIM_FROM.format(record_key="%(prefix)s || h.job_id")
        + " AND h.job_id NOT IN (SELECT value FROM json_each(%(exclude)s))"
        + CLAIM_ORDER
    )
