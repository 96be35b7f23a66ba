"""Statements of execution leases (``later_job_execution``) and worker heartbeats
(``later_worker``).

Every lease write names its owner, so a worker that lost a lease cannot touch
the new holder's row: zero rows changed means the lease is gone. Lists
(``job_ids``) are one bound parameter.
"""

from __future__ import annotations

from later_django.storage.driver import RowsStatement

LEASE_INTO = (
    "INSERT INTO later_job_execution (namespace, job_id, owner, lease_until, attempt, started_at) "
)
LEASE_CONFLICT = (
    " ON CONFLICT (namespace, job_id) DO UPDATE SET owner = excluded.owner, "
    "lease_until = excluded.lease_until, attempt = excluded.attempt, "
    "started_at = excluded.started_at"
)


class ExecutionQueries:
    """Lease and heartbeat statements; see the module docstring for the owner rule."""

    worker_heartbeat = (
        "INSERT INTO later_worker (namespace, worker_id, host, pid, concurrency, queues, "
        "busy, busy_queues, started_at, heartbeat_at) VALUES (%(namespace)s, %(worker_id)s, "
        "%(host)s, %(pid)s, %(concurrency)s, %(queues)s, %(busy)s, %(busy_queues)s, "
        "%(started_at)s, %(heartbeat_at)s) "
        "ON CONFLICT (namespace, worker_id) DO UPDATE SET busy = excluded.busy, "
        "busy_queues = excluded.busy_queues, heartbeat_at = excluded.heartbeat_at"
    )
    worker_remove = (
        "DELETE FROM later_worker WHERE namespace = %(namespace)s AND worker_id = %(worker_id)s"
    )
    # Bounded purge of rows whose process stopped beating long ago (the outer
    # test re-checks under lock).
    worker_purge_dead = (
        "DELETE FROM later_worker WHERE (namespace, worker_id) IN ("
        "SELECT namespace, worker_id FROM later_worker "
        "WHERE namespace = %(namespace)s AND heartbeat_at < %(before)s LIMIT %(limit)s) "
        "AND heartbeat_at < %(before)s"
    )
    # Bounded purge of leases that lapsed long ago and whose job is not running
    # (finished, retried, deleted); a lease taken again meanwhile has a fresh
    # lease_until and fails the outer test.
    lease_purge_dead = (
        "DELETE FROM later_job_execution WHERE (namespace, job_id) IN ("
        "SELECT lease.namespace, lease.job_id FROM later_job_execution AS lease "
        "WHERE lease.namespace = %(namespace)s AND lease.lease_until < %(before)s "
        "AND NOT EXISTS ("
        "SELECT 1 FROM later_jobs_index AS job WHERE job.namespace = lease.namespace "
        "AND job.job_id = lease.job_id AND job.stage = 'running') LIMIT %(limit)s) "
        "AND lease_until < %(before)s"
    )
    workers_live = (
        "SELECT worker_id, host, pid, concurrency, queues, busy, busy_queues, started_at, "
        "heartbeat_at FROM later_worker "
        "WHERE namespace = %(namespace)s AND heartbeat_at > %(after)s ORDER BY worker_id"
    )

    # Spelled per vendor.
    #: Rows of (job_id, lease_until, attempt) in job id order; shared namespace,
    #: owner, started_at.
    lease_insert_many: RowsStatement
    #: (lease_until, namespace, owner, job_ids) -> the job ids still held.
    lease_renew: str
    #: (namespace, owner, job_ids)
    lease_delete_many: str
    #: (namespace, job_ids) -> (job_id, owner, lease_until)
    lease_get_many: str
    #: (namespace, owners, limit) -> (job_id, owner, attempt, started_at, lease_until),
    #: oldest start first (then job id), at most ``limit`` rows.
    leases_of_owners: str
