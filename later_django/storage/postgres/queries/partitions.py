"""PostgreSQL partition statements: a call's partitions as arrays, one statement each."""

from __future__ import annotations

from later_django.storage.postgres import PostgresDriver
from later_django.storage.postgres.queries.leases import PostgresLeaseQueries
from later_django.storage.queries.kv import LIVE_MEMBER
from later_django.storage.queries.leases import PARTITION_LEASES
from later_django.storage.queries.partitions import (
    CLAIM_FROM,
    CLAIM_ORDER,
    HEAD_COLUMNS,
    PartitionQueries,
)

_AFFECTED = "unnest(%(topic)s::varchar[], %(partition_id)s::int[]) AS a(topic, partition_id)"
# The partition's lowest row but the exits, with its job's index stage and record.
_NEXT_OF = (
    "(SELECT j.sequence, j.job_id, j.earliest_run_at FROM later_partition_job AS j "
    "WHERE j.namespace = %(namespace)s AND j.topic = {alias}.topic "
    "AND j.partition_id = {alias}.partition_id AND NOT (j.job_id = ANY(%(exits)s)) "
    "ORDER BY j.sequence LIMIT 1) AS n"
)
_INDEX_AND_RECORD = (
    "LEFT JOIN later_jobs_index AS i ON i.namespace = %(namespace)s AND i.job_id = n.job_id "
    'LEFT JOIN later_storage AS s ON s.key = (%(prefix)s || n.job_id) COLLATE "C" '
    "AND (s.date_expire IS NULL OR s.date_expire > %(now)s)"
)
_ENTER = (
    "WITH batch AS (SELECT * FROM unnest(%(topic)s::varchar[], %(partition_id)s::int[], "
    "%(sequence)s::bigint[], %(job_id)s::varchar[], %(earliest_run_at)s::bigint[], "
    "%(stage)s::varchar[]) AS b(topic, partition_id, sequence, job_id, earliest_run_at, stage)), "
    "rows AS (INSERT INTO later_partition_job (namespace, topic, partition_id, "
    "sequence, job_id, earliest_run_at) SELECT %(namespace)s, topic, partition_id, sequence, "
    "job_id, earliest_run_at FROM batch ORDER BY topic, partition_id, sequence), "
    f"heads AS (INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
    "SELECT DISTINCT ON (topic, partition_id) %(namespace)s, topic, partition_id, sequence, "
    "job_id, earliest_run_at, stage FROM batch ORDER BY topic, partition_id, sequence "
    "ON CONFLICT (namespace, topic, partition_id) DO NOTHING) "
)


@PostgresDriver.register
class PostgresPartitionQueries(PartitionQueries):
    batched = True
    # One row per partition whose topic is registered with the given count, in key order.
    sequence_allocate = (
        "INSERT INTO later_partition_sequence (namespace, topic, partition_id, next_sequence) "
        "SELECT t.namespace, b.topic, b.partition_id, b.taken + 1 "
        "FROM unnest(%(topic)s::varchar[], %(partition_id)s::int[], %(taken)s::bigint[], "
        "%(partitions)s::int[]) AS b(topic, partition_id, taken, partitions) "
        "JOIN later_topic AS t ON t.namespace = %(namespace)s AND t.topic = b.topic "
        "AND t.partitions = b.partitions ORDER BY b.topic, b.partition_id "
        "ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET next_sequence = "
        "later_partition_sequence.next_sequence + excluded.next_sequence - 1 "
        "RETURNING topic, partition_id, next_sequence"
    )
    # The rows, and each partition's lowest new row as its head when it has none
    # (an existing head is left alone and not locked).
    enter = _ENTER + "SELECT 1"
    enter_notify = _ENTER + "SELECT pg_notify(%(channel)s, %(notify)s)"
    # In one statement, the rows of finished jobs leave, retried rows get their new
    # time, and each named partition's head becomes its lowest remaining row (stage
    # from the index, which this transaction already wrote) or is deleted when none
    # remains. The parts do not see each other's changes, so ``next`` leaves the
    # exits out and takes the new times itself. The leaving and retimed ids come
    # from materialized lists that carry the namespace, so their rows are found by
    # the (namespace, job_id) index whatever the statistics: with none (a table not
    # yet analyzed after a burst) `namespace = %(namespace)s AND job_id = ANY(...)`
    # was planned as a read of every row of the namespace, a few ms per finish.
    advance = (
        f"WITH affected AS (SELECT * FROM {_AFFECTED}), "
        "leaving AS MATERIALIZED (SELECT %(namespace)s::varchar AS namespace, e.job_id "
        "FROM unnest(%(exits)s::varchar[]) AS e(job_id)), "
        "gone AS (DELETE FROM later_partition_job AS j USING leaving AS e "
        "WHERE j.namespace = e.namespace AND j.job_id = e.job_id), "
        "retimed AS MATERIALIZED (SELECT %(namespace)s::varchar AS namespace, r.job_id, r.at "
        "FROM unnest(%(moved)s::varchar[], %(moved_at)s::bigint[]) AS r(job_id, at)), "
        "moved AS (UPDATE later_partition_job AS j SET earliest_run_at = r.at "
        "FROM retimed AS r WHERE j.namespace = r.namespace AND j.job_id = r.job_id), "
        "next AS (SELECT a.topic, a.partition_id, n.sequence, n.job_id, "
        "COALESCE(r.at, n.earliest_run_at) AS earliest_run_at, "
        "COALESCE(i.stage, 'enqueued') AS stage FROM affected AS a CROSS JOIN LATERAL "
        + _NEXT_OF.format(alias="a")
        + " LEFT JOIN unnest(%(moved)s::varchar[], %(moved_at)s::bigint[]) AS r(job_id, at) "
        "ON r.job_id = n.job_id "
        "LEFT JOIN later_jobs_index AS i ON i.namespace = %(namespace)s AND i.job_id = n.job_id), "
        f"upserted AS (INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
        "SELECT %(namespace)s, topic, partition_id, sequence, job_id, earliest_run_at, stage "
        "FROM next ORDER BY topic, partition_id "
        "ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET "
        "sequence = excluded.sequence, job_id = excluded.job_id, "
        "earliest_run_at = excluded.earliest_run_at, stage = excluded.stage) "
        "DELETE FROM later_partition_head AS h USING affected AS a "
        "WHERE h.namespace = %(namespace)s AND h.topic = a.topic "
        "AND h.partition_id = a.partition_id "
        "AND NOT EXISTS (SELECT 1 FROM next WHERE next.topic = a.topic "
        "AND next.partition_id = a.partition_id)"
    )
    # Read before the heads move, to start them in the same transaction.
    next_rows = (
        "SELECT a.topic, a.partition_id, n.sequence, n.job_id, "
        "COALESCE(i.stage, 'enqueued'), n.earliest_run_at, s.value "
        f"FROM {_AFFECTED} CROSS JOIN LATERAL "
        + _NEXT_OF.format(alias="a")
        + " "
        + _INDEX_AND_RECORD
    )
    # The partition leases' renew, and for each partition fenced its lowest row but
    # the exits (NULLs when none), as next_rows; then, as rows with no partition id,
    # the live members of the ranges (the finished jobs' continuations), oldest first.
    # The statement begins after the finish wrote its records, so a continuation
    # whose enqueue held a parent's row lock until it committed is seen here.
    # Each fenced row also sets plan_cache_mode for the rest of the transaction (see
    # PartitionStore.fence_and_next): its last column, ignored.
    fence_and_next = (
        "WITH fenced AS ("
        + PostgresLeaseQueries().of(PARTITION_LEASES).renew
        + ") SELECT f.topic, f.partition_id, n.sequence, n.job_id, "
        "COALESCE(i.stage, 'enqueued'), n.earliest_run_at, s.value, "
        "set_config('plan_cache_mode', 'force_generic_plan', true) FROM fenced AS f "
        "LEFT JOIN LATERAL " + _NEXT_OF.format(alias="f") + " ON true " + _INDEX_AND_RECORD + " "
        "UNION ALL (SELECT r.range_key, NULL, NULL, NULL, NULL, NULL, r.value, NULL "
        "FROM later_storage_range AS r WHERE r.range_key = ANY(%(ranges)s::varchar[]) "
        "AND " + LIVE_MEMBER + " ORDER BY r.range_key, r.sequence)"
    )
    # A head for each named partition that has rows but none (an enqueue that raced
    # with the partition's last head leaving).
    heads_materialize = (
        f"INSERT INTO later_partition_head ({HEAD_COLUMNS}) "
        "SELECT %(namespace)s, a.topic, a.partition_id, n.sequence, n.job_id, "
        "n.earliest_run_at, COALESCE(i.stage, 'enqueued') "
        f"FROM {_AFFECTED} CROSS JOIN LATERAL "
        "(SELECT j.sequence, j.job_id, j.earliest_run_at "
        "FROM later_partition_job AS j WHERE j.namespace = %(namespace)s AND j.topic = a.topic "
        "AND j.partition_id = a.partition_id ORDER BY j.sequence LIMIT 1) AS n "
        "LEFT JOIN later_jobs_index AS i ON i.namespace = %(namespace)s AND i.job_id = n.job_id "
        "WHERE NOT EXISTS (SELECT 1 FROM later_partition_head AS h "
        "WHERE h.namespace = %(namespace)s "
        "AND h.topic = a.topic AND h.partition_id = a.partition_id) "
        "ORDER BY a.topic, a.partition_id "
        "ON CONFLICT (namespace, topic, partition_id) DO NOTHING"
    )
    heads_claim = (
        CLAIM_FROM.format(record_key='(%(prefix)s || h.job_id) COLLATE "C"')
        + " AND NOT (h.job_id = ANY(%(exclude)s))"
        + CLAIM_ORDER
    )
