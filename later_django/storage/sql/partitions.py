"""Named SQL of topic partitions: sequences, partition rows, heads and leases.

Tables: ``later_partition_sequence`` (next sequence per partition),
``later_partition_job`` (every queued row of a partition),
``later_partition_head`` (the lowest row of each active partition, with its
job's stage), ``later_partition_lease`` (owner, expiry, fencing epoch).

PostgreSQL statements take a batch as arrays (``unnest``); SQLite statements
take one partition (or one row) per call, run inside one ``BEGIN IMMEDIATE``
transaction by :mod:`later_django.storage.partitions`, where a statement costs
no round trip. Stages named here are the engine's stage names.
"""

from __future__ import annotations

from later_django.storage.db import Statements
from later_django.storage.queries.queue import WAKE_CHANNEL

_HEAD_COLUMNS = "namespace, topic, partition_id, sequence, job_id, earliest_run_at, stage"

#: A head the worker may start: enqueued, or delayed/requeued and due; a running
#: head (not among the caller's own jobs) is an attempt lost with its old owner.
_RUNNABLE_HEAD = (
    "(h.stage IN ('enqueued', 'running') "
    "OR (h.stage IN ('delayed', 'requeued') AND h.earliest_run_at <= %s))"
)

# With the head's job record (key prefix ``<ns>-job-`` + job id, unexpired), so the
# start needs no second read: only the lease holder changes a head's record.
_CLAIM_FROM = (
    "SELECT h.topic, h.partition_id, h.sequence, h.job_id, h.stage, l.epoch, s.value "
    "FROM later_partition_lease AS l JOIN later_partition_head AS h "
    "ON h.namespace = l.namespace AND h.topic = l.topic AND h.partition_id = l.partition_id "
    "LEFT JOIN later_storage AS s ON s.key = {record_key} "
    "AND (s.date_expire IS NULL OR s.date_expire > %s) "
    "WHERE l.namespace = %s AND l.owner = %s AND l.lease_until > %s AND " + _RUNNABLE_HEAD
)

_LEASE_TAKE = (
    " ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET owner = excluded.owner, "
    "lease_until = excluded.lease_until, epoch = CASE "
    "WHEN later_partition_lease.owner = excluded.owner THEN later_partition_lease.epoch "
    "ELSE later_partition_lease.epoch + 1 END "
    "WHERE later_partition_lease.owner = excluded.owner "
    "OR later_partition_lease.owner IS NULL OR later_partition_lease.lease_until < %s "
    "RETURNING topic, partition_id, epoch"
)

PARTITION_SQL = Statements(
    {
        # (namespace, now): is any head runnable now, whoever owns it (--burst)
        "runnable_head_exists": (
            "SELECT 1 FROM later_partition_head AS h WHERE h.namespace = %s AND "
            "(h.stage = 'enqueued' OR (h.stage IN ('delayed', 'requeued') "
            "AND h.earliest_run_at <= %s)) LIMIT 1"
        ),
        # (namespace)
        "leases": (
            "SELECT topic, partition_id, owner, lease_until, epoch FROM later_partition_lease "
            "WHERE namespace = %s"
        ),
    },
    sqlite={
        # (partition_id, taken + 1, namespace, topic, partitions): the topic must be
        # registered with that partition count, else no row comes back
        "sequence_allocate": (
            "INSERT INTO later_partition_sequence (namespace, topic, partition_id, next_sequence) "
            "SELECT namespace, topic, %s, %s FROM later_topic "
            "WHERE namespace = %s AND topic = %s AND partitions = %s "
            "ON CONFLICT (namespace, topic, partition_id) DO UPDATE "
            "SET next_sequence = next_sequence + excluded.next_sequence - 1 "
            "RETURNING next_sequence"
        ),
        # rows of (namespace, topic, partition_id, sequence, job_id, earliest_run_at)
        "jobs_insert": (
            "INSERT INTO later_partition_job (namespace, topic, partition_id, sequence, job_id, "
            "earliest_run_at) VALUES {values}"
        ),
        "jobs_insert_values": "(%s, %s, %s, %s, %s, %s)",
        # one head: insert when the partition has none
        "head_insert_if_absent": (
            f"INSERT INTO later_partition_head ({_HEAD_COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (namespace, topic, partition_id) DO NOTHING"
        ),
        # (namespace, JSON job ids)
        "jobs_delete": (
            "DELETE FROM later_partition_job WHERE namespace = %s "
            "AND job_id IN (SELECT value FROM json_each(%s))"
        ),
        # (earliest_run_at, namespace, job_id)
        "job_run_at": (
            "UPDATE later_partition_job SET earliest_run_at = %s "
            "WHERE namespace = %s AND job_id = %s"
        ),
        # (namespace, namespace, topic, partition_id): the partition's lowest row, with
        # its job's stage from the index, becomes the head
        "head_recompute": (
            f"INSERT INTO later_partition_head ({_HEAD_COLUMNS}) "
            "SELECT j.namespace, j.topic, j.partition_id, j.sequence, j.job_id, "
            "j.earliest_run_at, COALESCE(i.stage, 'enqueued') FROM later_partition_job AS j "
            "LEFT JOIN later_jobs_index AS i ON i.namespace = %s AND i.job_id = j.job_id "
            "WHERE j.namespace = %s AND j.topic = %s AND j.partition_id = %s "
            "ORDER BY j.sequence LIMIT 1 "
            "ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET "
            "sequence = excluded.sequence, job_id = excluded.job_id, "
            "earliest_run_at = excluded.earliest_run_at, stage = excluded.stage"
        ),
        # (namespace, key prefix, now, namespace, topic, partition_id, JSON exit ids):
        # the partition's lowest row but the exits, with index stage and record
        "next_row": (
            "SELECT j.topic, j.partition_id, j.sequence, j.job_id, COALESCE(i.stage, 'enqueued'), "
            "j.earliest_run_at, s.value FROM later_partition_job AS j "
            "LEFT JOIN later_jobs_index AS i ON i.namespace = %s AND i.job_id = j.job_id "
            "LEFT JOIN later_storage AS s ON s.key = %s || j.job_id "
            "AND (s.date_expire IS NULL OR s.date_expire > %s) "
            "WHERE j.namespace = %s AND j.topic = %s AND j.partition_id = %s "
            "AND j.job_id NOT IN (SELECT value FROM json_each(%s)) ORDER BY j.sequence LIMIT 1"
        ),
        # (namespace, namespace, topic, partition_id, namespace, topic, partition_id)
        "head_materialize": (
            f"INSERT INTO later_partition_head ({_HEAD_COLUMNS}) "
            "SELECT j.namespace, j.topic, j.partition_id, j.sequence, j.job_id, "
            "j.earliest_run_at, COALESCE(i.stage, 'enqueued') FROM later_partition_job AS j "
            "LEFT JOIN later_jobs_index AS i ON i.namespace = %s AND i.job_id = j.job_id "
            "WHERE j.namespace = %s AND j.topic = %s AND j.partition_id = %s "
            "AND NOT EXISTS (SELECT 1 FROM later_partition_head AS h WHERE h.namespace = %s "
            "AND h.topic = %s AND h.partition_id = %s) ORDER BY j.sequence LIMIT 1 "
            "ON CONFLICT (namespace, topic, partition_id) DO NOTHING"
        ),
        # (namespace, topic, partition_id, namespace, topic, partition_id)
        "head_delete_if_empty": (
            "DELETE FROM later_partition_head WHERE namespace = %s AND topic = %s "
            "AND partition_id = %s AND NOT EXISTS (SELECT 1 FROM later_partition_job AS j "
            "WHERE j.namespace = %s AND j.topic = %s AND j.partition_id = %s)"
        ),
        # (key prefix, now, namespace, owner, now, now, JSON excluded job ids, limit)
        "heads_claim": (
            _CLAIM_FROM.format(record_key="%s || h.job_id")
            + " AND h.job_id NOT IN (SELECT value FROM json_each(%s)) "
            "ORDER BY h.earliest_run_at, h.topic, h.partition_id LIMIT %s"
        ),
        # (namespace, topic, partition_id, owner, lease_until, now)
        "lease_take": (
            "INSERT INTO later_partition_lease (namespace, topic, partition_id, owner, "
            "lease_until, epoch) VALUES (%s, %s, %s, %s, %s, 1)" + _LEASE_TAKE
        ),
        # (namespace, owner, topic, partition_id)
        "lease_release": (
            "UPDATE later_partition_lease SET owner = NULL, lease_until = 0 "
            "WHERE namespace = %s AND owner = %s AND topic = %s AND partition_id = %s"
        ),
        # (lease_until, namespace, topic, partition_id, owner, epoch)
        "lease_fence": (
            "UPDATE later_partition_lease SET lease_until = %s WHERE namespace = %s "
            "AND topic = %s AND partition_id = %s AND owner = %s AND epoch = %s "
            "RETURNING topic, partition_id"
        ),
    },
    postgresql={
        # (topics[], partition_ids[], taken[], partitions[], namespace): one row per
        # partition whose topic is registered with the given count, in key order
        "sequence_allocate": (
            "INSERT INTO later_partition_sequence (namespace, topic, partition_id, next_sequence) "
            "SELECT t.namespace, b.topic, b.partition_id, b.taken + 1 "
            "FROM unnest(%s::varchar[], %s::int[], %s::bigint[], %s::int[]) "
            "AS b(topic, partition_id, taken, partitions) "
            "JOIN later_topic AS t ON t.namespace = %s AND t.topic = b.topic "
            "AND t.partitions = b.partitions ORDER BY b.topic, b.partition_id "
            "ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET next_sequence = "
            "later_partition_sequence.next_sequence + excluded.next_sequence - 1 "
            "RETURNING topic, partition_id, next_sequence"
        ),
        # (topics[], partition_ids[], sequences[], job_ids[], earliest[], stages[],
        #  namespace, namespace): the rows, and each partition's lowest new row as its
        # head when it has none (an existing head is left alone and not locked)
        "enter": (
            "WITH batch AS (SELECT * FROM unnest(%s::varchar[], %s::int[], %s::bigint[], "
            "%s::varchar[], %s::bigint[], %s::varchar[]) "
            "AS b(topic, partition_id, sequence, job_id, earliest_run_at, stage)), "
            "rows AS (INSERT INTO later_partition_job (namespace, topic, partition_id, "
            "sequence, job_id, earliest_run_at) SELECT %s, topic, partition_id, sequence, "
            "job_id, earliest_run_at FROM batch ORDER BY topic, partition_id, sequence), "
            f"heads AS (INSERT INTO later_partition_head ({_HEAD_COLUMNS}) "
            "SELECT DISTINCT ON (topic, partition_id) %s, topic, partition_id, sequence, job_id, "
            "earliest_run_at, stage FROM batch ORDER BY topic, partition_id, sequence "
            "ON CONFLICT (namespace, topic, partition_id) DO NOTHING) "
        ),
        "enter_tail": "SELECT 1",
        "enter_tail_notify": f"SELECT pg_notify('{WAKE_CHANNEL}', %s)",
        # (topics[], partition_ids[], namespace, exit job_ids[], run_at job_ids[],
        #  run_at[], namespace, namespace, exit job_ids[], run_at job_ids[], run_at[],
        #  namespace, namespace, namespace): in one statement, the rows of finished
        # jobs leave, retried rows get their new time, and each named partition's
        # head becomes its lowest remaining row (stage from the index, which this
        # transaction already wrote) or is deleted when none remains. The parts do
        # not see each other's changes, so ``next`` leaves the exits out and takes
        # the new times itself.
        "advance": (
            "WITH affected AS (SELECT * FROM unnest(%s::varchar[], %s::int[]) "
            "AS a(topic, partition_id)), "
            "gone AS (DELETE FROM later_partition_job WHERE namespace = %s "
            "AND job_id = ANY(%s)), "
            "retimed AS (SELECT * FROM unnest(%s::varchar[], %s::bigint[]) AS r(job_id, at)), "
            "moved AS (UPDATE later_partition_job AS j SET earliest_run_at = r.at "
            "FROM retimed AS r WHERE j.namespace = %s AND j.job_id = r.job_id), "
            "next AS (SELECT a.topic, a.partition_id, n.sequence, n.job_id, "
            "COALESCE(r.at, n.earliest_run_at) AS earliest_run_at, "
            "COALESCE(i.stage, 'enqueued') AS stage FROM affected AS a CROSS JOIN LATERAL ("
            "SELECT j.sequence, j.job_id, j.earliest_run_at FROM later_partition_job AS j "
            "WHERE j.namespace = %s AND j.topic = a.topic AND j.partition_id = a.partition_id "
            "AND NOT (j.job_id = ANY(%s)) ORDER BY j.sequence LIMIT 1) AS n "
            "LEFT JOIN unnest(%s::varchar[], %s::bigint[]) AS r(job_id, at) "
            "ON r.job_id = n.job_id "
            "LEFT JOIN later_jobs_index AS i ON i.namespace = %s AND i.job_id = n.job_id), "
            f"upserted AS (INSERT INTO later_partition_head ({_HEAD_COLUMNS}) "
            "SELECT %s, topic, partition_id, sequence, job_id, earliest_run_at, stage FROM next "
            "ORDER BY topic, partition_id "
            "ON CONFLICT (namespace, topic, partition_id) DO UPDATE SET "
            "sequence = excluded.sequence, job_id = excluded.job_id, "
            "earliest_run_at = excluded.earliest_run_at, stage = excluded.stage) "
            "DELETE FROM later_partition_head AS h USING affected AS a "
            "WHERE h.namespace = %s AND h.topic = a.topic AND h.partition_id = a.partition_id "
            "AND NOT EXISTS (SELECT 1 FROM next WHERE next.topic = a.topic "
            "AND next.partition_id = a.partition_id)"
        ),
        # (topics[], partition_ids[], namespace, exit job_ids[], namespace, key prefix, now):
        # each named partition's lowest row but the exits, with its job's index stage
        # and record (read before the heads move, to start them in the same transaction)
        "next_rows": (
            "SELECT a.topic, a.partition_id, n.sequence, n.job_id, "
            "COALESCE(i.stage, 'enqueued'), n.earliest_run_at, s.value "
            "FROM unnest(%s::varchar[], %s::int[]) AS a(topic, partition_id) "
            "CROSS JOIN LATERAL (SELECT j.sequence, j.job_id, j.earliest_run_at "
            "FROM later_partition_job AS j WHERE j.namespace = %s AND j.topic = a.topic "
            "AND j.partition_id = a.partition_id AND NOT (j.job_id = ANY(%s)) "
            "ORDER BY j.sequence LIMIT 1) AS n "
            "LEFT JOIN later_jobs_index AS i ON i.namespace = %s AND i.job_id = n.job_id "
            'LEFT JOIN later_storage AS s ON s.key = (%s || n.job_id) COLLATE "C" '
            "AND (s.date_expire IS NULL OR s.date_expire > %s)"
        ),
        # (lease_until, topics[], partition_ids[], epochs[], namespace, owner, namespace,
        #  exit job_ids[], namespace, key prefix, now): lease_fence, and for each partition
        # fenced its lowest row but the exits (NULLs when none), as next_rows
        "fence_and_next": (
            "WITH fenced AS (UPDATE later_partition_lease AS l SET lease_until = %s "
            "FROM unnest(%s::varchar[], %s::int[], %s::bigint[]) AS b(topic, partition_id, epoch) "
            "WHERE l.namespace = %s AND l.owner = %s AND l.topic = b.topic "
            "AND l.partition_id = b.partition_id AND l.epoch = b.epoch "
            "RETURNING l.topic, l.partition_id) "
            "SELECT f.topic, f.partition_id, n.sequence, n.job_id, "
            "COALESCE(i.stage, 'enqueued'), n.earliest_run_at, s.value FROM fenced AS f "
            "LEFT JOIN LATERAL (SELECT j.sequence, j.job_id, j.earliest_run_at "
            "FROM later_partition_job AS j WHERE j.namespace = %s AND j.topic = f.topic "
            "AND j.partition_id = f.partition_id AND NOT (j.job_id = ANY(%s)) "
            "ORDER BY j.sequence LIMIT 1) AS n ON true "
            "LEFT JOIN later_jobs_index AS i ON i.namespace = %s AND i.job_id = n.job_id "
            'LEFT JOIN later_storage AS s ON s.key = (%s || n.job_id) COLLATE "C" '
            "AND (s.date_expire IS NULL OR s.date_expire > %s)"
        ),
        # (namespace, topics[], partition_ids[], namespace, namespace, namespace): a head
        # for each named partition that has rows but none (an enqueue that raced with
        # the partition's last head leaving)
        "heads_materialize": (
            f"INSERT INTO later_partition_head ({_HEAD_COLUMNS}) "
            "SELECT %s, a.topic, a.partition_id, n.sequence, n.job_id, n.earliest_run_at, "
            "COALESCE(i.stage, 'enqueued') "
            "FROM unnest(%s::varchar[], %s::int[]) AS a(topic, partition_id) "
            "CROSS JOIN LATERAL (SELECT j.sequence, j.job_id, j.earliest_run_at "
            "FROM later_partition_job AS j WHERE j.namespace = %s AND j.topic = a.topic "
            "AND j.partition_id = a.partition_id ORDER BY j.sequence LIMIT 1) AS n "
            "LEFT JOIN later_jobs_index AS i ON i.namespace = %s AND i.job_id = n.job_id "
            "WHERE NOT EXISTS (SELECT 1 FROM later_partition_head AS h WHERE h.namespace = %s "
            "AND h.topic = a.topic AND h.partition_id = a.partition_id) "
            "ORDER BY a.topic, a.partition_id "
            "ON CONFLICT (namespace, topic, partition_id) DO NOTHING"
        ),
        # (key prefix, now, namespace, owner, now, now, excluded job_ids[], limit)
        "heads_claim": (
            _CLAIM_FROM.format(record_key='(%s || h.job_id) COLLATE "C"')
            + " AND NOT (h.job_id = ANY(%s)) "
            "ORDER BY h.earliest_run_at, h.topic, h.partition_id LIMIT %s"
        ),
        # (namespace, owner, lease_until, topics[], partition_ids[], now)
        "lease_take": (
            "INSERT INTO later_partition_lease (namespace, topic, partition_id, owner, "
            "lease_until, epoch) SELECT %s, b.topic, b.partition_id, %s, %s, 1 "
            "FROM unnest(%s::varchar[], %s::int[]) AS b(topic, partition_id) "
            "ORDER BY b.topic, b.partition_id" + _LEASE_TAKE
        ),
        # (namespace, owner, topics[], partition_ids[])
        "lease_release": (
            "UPDATE later_partition_lease AS l SET owner = NULL, lease_until = 0 "
            "FROM unnest(%s::varchar[], %s::int[]) AS b(topic, partition_id) "
            "WHERE l.namespace = %s AND l.owner = %s AND l.topic = b.topic "
            "AND l.partition_id = b.partition_id"
        ),
        # (lease_until, topics[], partition_ids[], epochs[], namespace, owner)
        "lease_fence": (
            "UPDATE later_partition_lease AS l SET lease_until = %s "
            "FROM unnest(%s::varchar[], %s::int[], %s::bigint[]) AS b(topic, partition_id, epoch) "
            "WHERE l.namespace = %s AND l.owner = %s AND l.topic = b.topic "
            "AND l.partition_id = b.partition_id AND l.epoch = b.epoch "
            "RETURNING l.topic, l.partition_id"
        ),
    },
)
