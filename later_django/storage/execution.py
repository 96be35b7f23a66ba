"""Execution leases and worker heartbeats on a Django connection.

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

from later_django.storage.db import AliasBound, SqlRunner
from later_django.storage.sql.execution import EXECUTION_SQL


@dataclass(frozen=True)
class ExecutionLease:
    job_id: str
    owner: str
    lease_until_ms: int


@dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    host: str
    pid: int
    concurrency: int
    queues: list[str]
    busy: int
    started_at_ms: int
    heartbeat_at_ms: int


class ExecutionStore(AliasBound):
    """Leases of running jobs and heartbeats of worker processes, on the alias ``using``."""

    @property
    def _execution_sql(self) -> SqlRunner:
        return SqlRunner(self.using, EXECUTION_SQL)

    def lease_acquire_many(
        self,
        namespace: str,
        owner: str,
        started_at_ms: int,
        leases: Sequence[tuple[str, int, int]],
    ) -> None:
        """Writes ``(job_id, lease_until_ms, attempt)`` leases for ``owner`` in one
        statement, replacing any earlier (lapsed) holder's row."""
        if not leases:
            return
        runner = self._execution_sql
        if runner.vendor == "postgresql":
            with runner.cursor() as cursor:
                cursor.execute(*self.lease_acquire_part(namespace, owner, started_at_ms, leases))
        else:
            ordered = sorted(leases)
            runner.execute_values(
                "lease_insert_many",
                [
                    [namespace, job_id, owner, until, attempt, started_at_ms]
                    for job_id, until, attempt in ordered
                ],
            )

    def lease_acquire_part(
        self,
        namespace: str,
        owner: str,
        started_at_ms: int,
        leases: Sequence[tuple[str, int, int]],
    ) -> tuple[str, list[Any]]:
        """PostgreSQL: the statement and parameters of ``lease_acquire_many``."""
        ordered = sorted(leases)
        return self._execution_sql.sql("lease_insert_many"), [
            namespace,
            owner,
            started_at_ms,
            [job_id for job_id, _, _ in ordered],
            [until for _, until, _ in ordered],
            [attempt for _, _, attempt in ordered],
        ]

    def lease_release_part(
        self, namespace: str, owner: str, job_ids: Sequence[str]
    ) -> tuple[str, list[Any]]:
        """PostgreSQL: the statement and parameters of ``lease_release_many``."""
        return self._execution_sql.sql("lease_delete_many"), [namespace, owner, sorted(job_ids)]

    def lease_renew(
        self, namespace: str, owner: str, job_ids: Sequence[str], lease_until_ms: int
    ) -> list[str]:
        """Extends ``owner``'s leases; returns the job ids it still holds."""
        if not job_ids:
            return []
        runner = self._execution_sql
        rows = runner.fetch_all(
            "lease_renew",
            [lease_until_ms, namespace, owner, runner.list_param(sorted(job_ids))],
        )
        return [job_id for (job_id,) in rows]

    def lease_release_many(self, namespace: str, owner: str, job_ids: Sequence[str]) -> int:
        """Deletes ``owner``'s leases of ``job_ids``; returns how many it held."""
        if not job_ids:
            return 0
        runner = self._execution_sql
        return runner.execute(
            "lease_delete_many", [namespace, owner, runner.list_param(sorted(job_ids))]
        )

    def lease_get_many(self, namespace: str, job_ids: Sequence[str]) -> dict[str, ExecutionLease]:
        """The current lease rows of ``job_ids`` (lapsed ones included)."""
        if not job_ids:
            return {}
        runner = self._execution_sql
        rows = runner.fetch_all("lease_get_many", [namespace, runner.list_param(list(job_ids))])
        return {job_id: ExecutionLease(job_id, owner, int(until)) for job_id, owner, until in rows}

    def worker_heartbeat(self, namespace: str, worker: WorkerRow) -> None:
        """Creates or refreshes the worker's row (``busy`` and ``heartbeat_at``)."""
        self._execution_sql.execute(
            "worker_heartbeat",
            [
                namespace,
                worker.worker_id,
                worker.host,
                worker.pid,
                worker.concurrency,
                json.dumps(worker.queues),
                worker.busy,
                worker.started_at_ms,
                worker.heartbeat_at_ms,
            ],
        )

    def worker_remove(self, namespace: str, worker_id: str) -> None:
        """Deletes the worker's row (a graceful exit)."""
        self._execution_sql.execute("worker_remove", [namespace, worker_id])

    def worker_purge_dead(self, namespace: str, heartbeat_before_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` worker rows whose last heartbeat is before
        ``heartbeat_before_ms`` (one statement); returns how many. A live worker
        beats every third of its lease, so a cut-off far behind that is dead."""
        if limit <= 0:
            return 0
        return self._execution_sql.execute(
            "worker_purge_dead", [namespace, heartbeat_before_ms, limit, heartbeat_before_ms]
        )

    def lease_purge_dead(self, namespace: str, lapsed_before_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` execution leases that lapsed before
        ``lapsed_before_ms`` and whose job's index row is not ``running`` (the job
        finished, was retried or deleted: nothing reads the lease again); one
        statement; returns how many. A lease of a job still marked running is kept,
        because the next start of that job names the lost worker from it."""
        if limit <= 0:
            return 0
        return self._execution_sql.execute(
            "lease_purge_dead", [namespace, lapsed_before_ms, limit, lapsed_before_ms]
        )

    def workers_live(self, namespace: str, heartbeat_after_ms: int) -> list[WorkerRow]:
        """Workers whose last heartbeat is after ``heartbeat_after_ms``."""
        rows = self._execution_sql.fetch_all("workers_live", [namespace, heartbeat_after_ms])
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
            )
            for worker_id, host, pid, concurrency, queues, busy, started, heartbeat in rows
        ]
