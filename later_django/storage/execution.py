"""Execution leases and worker heartbeats on one driver's connection.

``later_job_execution`` holds one row per running job: who runs it and until
when the lease holds. A worker renews the leases of its running jobs while
they run; a lease that lapsed means the worker is gone and the job may be run
again. ``later_worker`` holds one row per live worker process, refreshed by
its heartbeat; the dashboard and ``later_status`` read it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from later_django.storage.driver import Driver
from later_django.storage.queries.executions import ExecutionQueries
from later_django.storage.types import ExecutionLease, WorkerRow


def lease_rows(leases: Sequence[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """The rows of ``ExecutionQueries.lease_insert_many`` for ``(job_id, lease_until_ms,
    attempt)`` leases, in job id order (the lock order of concurrent batches)."""
    return [
        {"job_id": job_id, "lease_until": until, "attempt": attempt}
        for job_id, until, attempt in sorted(leases)
    ]


@dataclass(frozen=True)
class RunningExecution:
    """One execution lease as the workers page shows it: the job, the worker that runs
    it (``owner``), which attempt, since when, and until when the lease holds."""

    job_id: str
    owner: str
    attempt: int
    started_at_ms: int
    lease_until_ms: int


class ExecutionStore:
    """Leases of running jobs and heartbeats of worker processes, on one driver's connection."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(ExecutionQueries)

    def lease_acquire_many(
        self,
        namespace: str,
        owner: str,
        started_at_ms: int,
        leases: Sequence[tuple[str, int, int]],
    ) -> None:
        """Writes ``(job_id, lease_until_ms, attempt)`` leases for ``owner`` in one
        statement (SQLite: one per chunk of its bound-variable limit, in one
        transaction), replacing any earlier (lapsed) holder's row."""
        shared = {"namespace": namespace, "owner": owner, "started_at": started_at_ms}
        self._driver.execute_rows(self._q.lease_insert_many, lease_rows(leases), shared)

    def lease_acquire_part(
        self,
        namespace: str,
        owner: str,
        started_at_ms: int,
        leases: Sequence[tuple[str, int, int]],
    ) -> tuple[str, dict[str, Any]]:
        """The statement and parameters of ``lease_acquire_many`` (a combined write's part)."""
        shared = {"namespace": namespace, "owner": owner, "started_at": started_at_ms}
        return self._driver.rows_part(self._q.lease_insert_many, lease_rows(leases), shared)

    def lease_release_part(
        self, namespace: str, owner: str, job_ids: Sequence[str]
    ) -> tuple[str, dict[str, Any]]:
        """The statement and parameters of ``lease_release_many`` (a combined write's part)."""
        return self._q.lease_delete_many, self._owned(namespace, owner, job_ids)

    def _owned(self, namespace: str, owner: str, job_ids: Sequence[str]) -> dict[str, Any]:
        """The parameters naming ``owner``'s leases of ``job_ids`` (in key order)."""
        job_id_list = self._driver.list_param(sorted(job_ids))
        return {"namespace": namespace, "owner": owner, "job_ids": job_id_list}

    def lease_renew(
        self, namespace: str, owner: str, job_ids: Sequence[str], lease_until_ms: int
    ) -> list[str]:
        """Extends ``owner``'s leases; returns the job ids it still holds."""
        if not job_ids:
            return []
        params = {**self._owned(namespace, owner, job_ids), "lease_until": lease_until_ms}
        rows = self._driver.fetch_all(self._q.lease_renew, params)
        return [job_id for (job_id,) in rows]

    def lease_release_many(self, namespace: str, owner: str, job_ids: Sequence[str]) -> int:
        """Deletes ``owner``'s leases of ``job_ids``; returns how many it held."""
        if not job_ids:
            return 0
        return self._driver.execute(
            self._q.lease_delete_many, self._owned(namespace, owner, job_ids)
        )

    def lease_get_many(self, namespace: str, job_ids: Sequence[str]) -> dict[str, ExecutionLease]:
        """The current lease rows of ``job_ids`` (lapsed ones included)."""
        if not job_ids:
            return {}
        params = {"namespace": namespace, "job_ids": self._driver.list_param(list(job_ids))}
        rows = self._driver.fetch_all(self._q.lease_get_many, params)
        return {job_id: ExecutionLease(job_id, owner, int(until)) for job_id, owner, until in rows}

    def leases_of_owners(
        self, namespace: str, owners: Sequence[str], limit: int
    ) -> list[RunningExecution]:
        """The execution leases held by ``owners`` (worker ids; lapsed leases included),
        the oldest start first, at most ``limit`` (one statement over the namespace's
        rows of ``later_job_execution``: one row per running job)."""
        if not owners or limit <= 0:
            return []
        params = {
            "namespace": namespace,
            "owners": self._driver.list_param(sorted(set(owners))),
            "limit": limit,
        }
        rows = self._driver.fetch_all(self._q.leases_of_owners, params)
        return [
            RunningExecution(job_id, owner, int(attempt), int(started), int(until))
            for job_id, owner, attempt, started, until in rows
        ]

    def worker_heartbeat(self, namespace: str, worker: WorkerRow) -> None:
        """Creates or refreshes the worker's row (``busy``, ``busy_queues`` and
        ``heartbeat_at``)."""
        self._driver.execute(
            self._q.worker_heartbeat,
            {
                "namespace": namespace,
                "worker_id": worker.worker_id,
                "host": worker.host,
                "pid": worker.pid,
                "concurrency": worker.concurrency,
                "queues": json.dumps(worker.queues),
                "busy": worker.busy,
                "busy_queues": json.dumps(worker.busy_queues, sort_keys=True),
                "started_at": worker.started_at_ms,
                "heartbeat_at": worker.heartbeat_at_ms,
            },
        )

    def worker_remove(self, namespace: str, worker_id: str) -> None:
        """Deletes the worker's row (a graceful exit)."""
        self._driver.execute(
            self._q.worker_remove,
            {"namespace": namespace, "worker_id": worker_id},
        )

    def worker_purge_dead(self, namespace: str, heartbeat_before_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` worker rows whose last heartbeat is before
        ``heartbeat_before_ms`` (one statement); returns how many. A live worker
        beats every third of its lease, so a cut-off far behind that is dead."""
        if limit <= 0:
            return 0
        return self._driver.execute(
            self._q.worker_purge_dead,
            {"namespace": namespace, "before": heartbeat_before_ms, "limit": limit},
        )

    def lease_purge_dead(self, namespace: str, lapsed_before_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` execution leases that lapsed before
        ``lapsed_before_ms`` and whose job's index row is not ``running`` (the job
        finished, was retried or deleted: nothing reads the lease again); one
        statement; returns how many. A lease of a job still marked running is kept,
        because the next start of that job names the lost worker from it."""
        if limit <= 0:
            return 0
        return self._driver.execute(
            self._q.lease_purge_dead,
            {"namespace": namespace, "before": lapsed_before_ms, "limit": limit},
        )

    def workers_live(self, namespace: str, heartbeat_after_ms: int) -> list[WorkerRow]:
        """Workers whose last heartbeat is after ``heartbeat_after_ms``."""
        rows = self._driver.fetch_all(
            self._q.workers_live,
            {"namespace": namespace, "after": heartbeat_after_ms},
        )
        return [
            WorkerRow(
                worker_id=worker_id,
                host=host,
                pid=int(pid),
                concurrency=int(concurrency),
                queues=json.loads(queues),
                busy=int(busy),
                started_at_ms=int(started),
                heartbeat_at_ms=int(heartbeat),
                busy_queues=json.loads(busy_queues),
            )
            for (
                worker_id,
                host,
                pid,
                concurrency,
                queues,
                busy,
                busy_queues,
                started,
                heartbeat,
            ) in rows
        ]
