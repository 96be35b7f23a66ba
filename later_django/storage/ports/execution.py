"""The execution port: execution leases of running jobs and the worker rows.

``ExecutionPort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from later_django.storage.execution import RunningExecution
from later_django.storage.types import ExecutionLease, WorkerRow


@runtime_checkable
class ExecutionPort(Protocol):
    """Execution leases of running jobs and the heartbeat rows of worker processes. Implemented
    by :class:`~later_django.storage.execution.ExecutionStore`."""

    def lease_acquire_many(
        self,
        namespace: str,
        owner: str,
        started_at_ms: int,
        leases: Sequence[tuple[str, int, int]],
    ) -> None:
        """Writes ``(job_id, lease_until_ms, attempt)`` leases for ``owner`` in one statement
        (SQLite: one per chunk of its bound-variable limit, in one transaction), replacing any
        earlier (lapsed) holder's row."""

    def lease_renew(
        self, namespace: str, owner: str, job_ids: Sequence[str], lease_until_ms: int
    ) -> list[str]:
        """Extends ``owner``'s leases; returns the job ids it still holds."""

    def lease_release_many(self, namespace: str, owner: str, job_ids: Sequence[str]) -> int:
        """Deletes ``owner``'s leases of ``job_ids``; returns how many it held."""

    def lease_get_many(self, namespace: str, job_ids: Sequence[str]) -> dict[str, ExecutionLease]:
        """The current lease rows of ``job_ids`` (lapsed ones included)."""

    def leases_of_owners(
        self, namespace: str, owners: Sequence[str], limit: int
    ) -> list[RunningExecution]:
        """The execution leases held by any of ``owners`` (worker ids), lapsed ones
        included, the oldest start first (then by job id), at most ``limit``; ``[]``
        without owners or for a ``limit`` below 1."""

    def worker_heartbeat(self, namespace: str, worker: WorkerRow) -> None:
        """Creates or refreshes the worker's row (``busy`` and ``heartbeat_at``)."""

    def worker_remove(self, namespace: str, worker_id: str) -> None:
        """Deletes the worker's row (a graceful exit)."""

    def worker_purge_dead(self, namespace: str, heartbeat_before_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` worker rows whose last heartbeat is before
        ``heartbeat_before_ms`` (one statement); returns how many. A live worker beats every
        third of its lease, so a cut-off far behind that is dead."""

    def lease_purge_dead(self, namespace: str, lapsed_before_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` execution leases that lapsed before ``lapsed_before_ms`` and
        whose job's index row is not ``running`` (the job finished, was retried or deleted:
        nothing reads the lease again); one statement; returns how many. A lease of a job
        still marked running is kept, because the next start of that job names the lost worker
        from it."""

    def workers_live(self, namespace: str, heartbeat_after_ms: int) -> list[WorkerRow]:
        """Workers whose last heartbeat is after ``heartbeat_after_ms``."""
