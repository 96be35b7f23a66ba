"""Helpers of the partition tests: read the partition tables and records."""

from __future__ import annotations

from typing import Any

from django.db import connections

from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record
from later_django.storage.stores import stores_for
from tests.partitions.conftest import NAMESPACE

PARTITION_TABLES = (
    "later_partition_sequence",
    "later_partition_job",
    "later_partition_head",
    "later_partition_lease",
)


def fetch(alias: str, sql: str, params: list[Any] | None = None) -> list[tuple]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params or [])
        return [tuple(row) for row in cursor.fetchall()]


def record_of(alias: str, job_id: str) -> JobRecord:
    raw = stores_for(alias).kv.get(job_key(NAMESPACE, job_id))
    assert raw is not None, f"job {job_id} has no record"
    return decode_record(raw)


def heads(alias: str) -> list[tuple]:
    """(topic, partition_id, sequence, job_id, earliest_run_at, stage) of every head."""
    return fetch(
        alias,
        "SELECT topic, partition_id, sequence, job_id, earliest_run_at, stage "
        "FROM later_partition_head WHERE namespace = %s ORDER BY topic, partition_id",
        [NAMESPACE],
    )


def partition_rows(alias: str) -> list[tuple]:
    """(topic, partition_id, sequence, job_id) of every partition row."""
    return fetch(
        alias,
        "SELECT topic, partition_id, sequence, job_id FROM later_partition_job "
        "WHERE namespace = %s ORDER BY topic, partition_id, sequence",
        [NAMESPACE],
    )


def index_row(alias: str, job_id: str) -> tuple | None:
    """(stage, topic, partition_id, sequence, wait_mode) of the job's index row."""
    rows = fetch(
        alias,
        "SELECT stage, topic, partition_id, sequence, wait_mode FROM later_jobs_index "
        "WHERE namespace = %s AND job_id = %s",
        [NAMESPACE, job_id],
    )
    return rows[0] if rows else None


def snapshot(alias: str) -> dict[str, list[tuple]]:
    """Every row of the tables a job's writes touch, for before/after comparisons."""
    key = connections[alias].ops.quote_name("key")
    tables = {
        "later_storage": f"SELECT {key}, value FROM later_storage ORDER BY {key}",
        "later_jobs_index": (
            "SELECT job_id, stage, revision, topic, partition_id, sequence FROM later_jobs_index "
            "ORDER BY job_id"
        ),
        "later_partition_job": (
            "SELECT topic, partition_id, sequence, job_id, earliest_run_at "
            "FROM later_partition_job ORDER BY topic, partition_id, sequence"
        ),
        "later_partition_head": (
            "SELECT topic, partition_id, sequence, job_id, earliest_run_at, stage "
            "FROM later_partition_head ORDER BY topic, partition_id"
        ),
    }
    return {
        name: [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]
        for name, sql in tables.items()
        for rows in [fetch(alias, sql)]
    }
