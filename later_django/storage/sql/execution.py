"""Named SQL of execution leases (``later_job_execution``) and worker heartbeats (``later_worker``).

Lists are bound as one parameter (JSON array on SQLite, array on PostgreSQL).
Every lease write names its owner, so a worker that lost a lease cannot touch
the new holder's row: zero rows changed means the lease is gone.
"""

from __future__ import annotations

from later_django.storage.db import Statements

_LEASE_INTO = (
    "INSERT INTO later_job_execution (namespace, job_id, owner, lease_until, attempt, started_at) "
)
_LEASE_CONFLICT = (
    " ON CONFLICT (namespace, job_id) DO UPDATE SET owner = excluded.owner, "
    "lease_until = excluded.lease_until, attempt = excluded.attempt, "
    "started_at = excluded.started_at"
)

EXECUTION_SQL = Statements(
    {
        # (namespace, worker_id, host, pid, concurrency, queues, busy, started_at, heartbeat_at)
        "worker_heartbeat": (
            "INSERT INTO later_worker (namespace, worker_id, host, pid, concurrency, queues, "
            "busy, started_at, heartbeat_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (namespace, worker_id) DO UPDATE SET busy = excluded.busy, "
            "heartbeat_at = excluded.heartbeat_at"
        ),
        # (namespace, worker_id)
        "worker_remove": "DELETE FROM later_worker WHERE namespace = %s AND worker_id = %s",
        # (namespace, heartbeat_before, limit, heartbeat_before): bounded purge of rows
        # whose process stopped beating long ago (the outer test re-checks under lock)
        "worker_purge_dead": (
            "DELETE FROM later_worker WHERE (namespace, worker_id) IN ("
            "SELECT namespace, worker_id FROM later_worker "
            "WHERE namespace = %s AND heartbeat_at < %s LIMIT %s) AND heartbeat_at < %s"
        ),
        # (namespace, lapsed_before, limit, lapsed_before): bounded purge of leases that
        # lapsed long ago and whose job is not running (finished, retried, deleted); a
        # lease taken again meanwhile has a fresh lease_until and fails the outer test
        "lease_purge_dead": (
            "DELETE FROM later_job_execution WHERE (namespace, job_id) IN ("
            "SELECT lease.namespace, lease.job_id FROM later_job_execution AS lease "
            "WHERE lease.namespace = %s AND lease.lease_until < %s AND NOT EXISTS ("
            "SELECT 1 FROM later_jobs_index AS job WHERE job.namespace = lease.namespace "
            "AND job.job_id = lease.job_id AND job.stage = 'running') LIMIT %s) "
            "AND lease_until < %s"
        ),
        # (namespace, heartbeat_after)
        "workers_live": (
            "SELECT worker_id, host, pid, concurrency, queues, busy, started_at, heartbeat_at "
            "FROM later_worker WHERE namespace = %s AND heartbeat_at > %s ORDER BY worker_id"
        ),
    },
    sqlite={
        # rows of (namespace, job_id, owner, lease_until, attempt, started_at)
        "lease_insert_many": _LEASE_INTO + "VALUES {values}" + _LEASE_CONFLICT,
        "lease_insert_many_values": "(%s, %s, %s, %s, %s, %s)",
        # (lease_until, namespace, owner, JSON job ids)
        "lease_renew": (
            "UPDATE later_job_execution SET lease_until = %s WHERE namespace = %s "
            "AND owner = %s AND job_id IN (SELECT value FROM json_each(%s)) RETURNING job_id"
        ),
        # (namespace, owner, JSON job ids)
        "lease_delete_many": (
            "DELETE FROM later_job_execution WHERE namespace = %s AND owner = %s "
            "AND job_id IN (SELECT value FROM json_each(%s))"
        ),
        # (namespace, JSON job ids)
        "lease_get_many": (
            "SELECT job_id, owner, lease_until FROM later_job_execution WHERE namespace = %s "
            "AND job_id IN (SELECT value FROM json_each(%s))"
        ),
    },
    postgresql={
        # (namespace, owner, started_at, job_ids[], lease_untils[], attempts[]), key order
        "lease_insert_many": (
            _LEASE_INTO + "SELECT %s, batch.job_id, %s, batch.lease_until, batch.attempt, %s "
            "FROM unnest(%s::varchar[], %s::bigint[], %s::int[]) "
            "AS batch(job_id, lease_until, attempt) ORDER BY batch.job_id" + _LEASE_CONFLICT
        ),
        "lease_renew": (
            "UPDATE later_job_execution SET lease_until = %s WHERE namespace = %s "
            "AND owner = %s AND job_id = ANY(%s) RETURNING job_id"
        ),
        "lease_delete_many": (
            "DELETE FROM later_job_execution WHERE namespace = %s AND owner = %s "
            "AND job_id = ANY(%s)"
        ),
        "lease_get_many": (
            "SELECT job_id, owner, lease_until FROM later_job_execution WHERE namespace = %s "
            "AND job_id = ANY(%s)"
        ),
    },
)
