"""The job index port: the dashboard's index of jobs, its stage counters and pages.

``JobIndexPort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from later_django.storage.job_filters import FilteredIndexPort
from later_django.storage.job_index import QueuedMessage
from later_django.storage.types import JobIndexChange, JobIndexPage, JobIndexRow


@runtime_checkable
class JobIndexPort(FilteredIndexPort, Protocol):
    """The dashboard's index of jobs, its stage counters, metric buckets and queue samples.
    Implemented by :class:`~later_django.storage.job_index.JobIndexStore`."""

    def job_index_upsert(self, namespace: str, rows: Sequence[JobIndexRow]) -> None:
        """Inserts or updates each row; an update applies only when the incoming ``revision`` is
        at least the stored one (``wait_ms``, ``wait_mode`` and ``parent_job_id`` keep their
        stored value when the incoming one is null)."""

    def job_index_remove(self, namespace: str, job_ids: Sequence[str]) -> None:
        """Deletes the index rows of ``job_ids`` in one statement (absent ones are ignored)."""

    def apply_index_changes(self, namespace: str, changes: Sequence[JobIndexChange]) -> None:
        """Applies ``changes`` as if one after another, in at most two statements."""

    def job_index_stage_counts(self, namespace: str) -> dict[str, int]:
        """Job count per stage, from one query whose parts are O(1) or bounded."""

    def job_index_reconcile_stage_counts(
        self, namespace: str, *, max_rows: int | None = None
    ) -> int:
        """Corrects the namespace's stage counters and queue depths to recounts; exact
        beside concurrent writers once they commit, and no write when nothing drifted.
        With ``max_rows``, a table whose namespace holds more rows is not recounted
        (nor read beyond ``max_rows + 1`` entries). Returns the tables recounted (0-2)."""

    def job_index_list_by_stage(
        self, namespace: str, stage: str, cursor: str | None = None, limit: int = 50
    ) -> JobIndexPage:
        """A page of at most ``limit`` index rows in ``stage``, most recently transitioned first;
        the rows of ``enqueued`` are those of partitioned jobs only (the others have no index
        row: see :meth:`queued_messages`)."""

    def queued_messages(
        self, namespace: str, before_sequence: int | None, limit: int
    ) -> list[QueuedMessage]:
        """Up to ``limit`` unclaimed messages of the namespace's queues with a sequence below
        ``before_sequence`` (all when ``None``), newest first; one walk of the queue's
        primary key whose cost is ``limit``.
        Payloads are returned as stored, undecoded."""

    def job_index_list_by_partition(
        self,
        namespace: str,
        topic: str,
        partition_id: int,
        cursor: str | None = None,
        limit: int = 50,
    ) -> JobIndexPage:
        """A page of the jobs ever enqueued to one partition, highest sequence first; the cursor
        is the last sequence shown (exclusive)."""

    def job_index_partition_neighbor(
        self, namespace: str, topic: str, partition_id: int, sequence: int, older: bool
    ) -> JobIndexRow | None:
        """The job at exactly ``sequence - 1`` (``older``) or ``sequence + 1``, or ``None``."""

    def job_index_list_continuations(
        self, namespace: str, parent_job_id: str, limit: int
    ) -> list[JobIndexRow]:
        """Up to ``limit`` jobs whose parent is ``parent_job_id``, oldest (``stage_date_ms``,
        then ``job_id``) first."""

    def job_index_get(self, namespace: str, job_id: str) -> JobIndexRow | None:
        """One job's index row (expired rows included), or ``None``."""

    def job_index_sweep_expired(self, namespace: str, now_ms: int, limit: int) -> int:
        """Deletes up to ``limit`` index rows of the namespace expired at ``now_ms`` (one bounded
        statement), and the metric buckets more than ``METRIC_RETENTION_MINUTES`` before it;
        returns the index rows removed."""

    def purge_unused_dashboard_rows(self, namespace: str, limit: int) -> int:
        """Removes up to ``limit`` rows in total that nothing reads any more; returns how many
        (zero means none are left)."""
