"""Operator actions on every job a :class:`JobSelection` picks, in bounded
batches: :func:`retry_selected`, :func:`run_now_selected`, :func:`cancel_selected`,
:func:`delete_selected` (the native API, ``later_jobs`` and the dashboard's bulk
actions).

Each batch is one transaction: the records read under a row lock, the stage found
checked, every change written through the engine; no transaction holds more than
``batch_size`` jobs, and a walk's keyset cursor only moves on. Jobs on a topic
partition are refused, except deleting a finished one and cancelling a live one
(a request its partition's owner carries out).
"""

from __future__ import annotations

import contextlib

from django.db import transaction

from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.engine.job_actions.queued_cancel import cancel_queued_in_batches
from later_django.engine.job_actions.record_checks import (
    REQUESTED,
    RecordAction,
    cancel_record,
    commit_action,
    delete_record,
    retry_record,
    run_record_now,
)
from later_django.engine.job_actions.selection import (
    BULK_CANCEL_STAGES,
    BULK_DELETE_STAGES,
    BULK_RUN_NOW_STAGES,
    DEFAULT_BATCH_SIZE,
    QUEUE_CURSOR,
    BulkOutcome,
    JobSelection,
    Walk,
    refuse,
)
from later_django.engine.record_reads import read_records_and_errors
from later_django.engine.writes import JobWrites
from later_django.exceptions import ActionRefused
from later_django.storage.stores import Stores, stores_for


def _walk(using: str, namespace: str, batch_size: int, dry_run: bool, max_rows: int | None) -> Walk:
    return Walk(stores_for(using), namespace, batch_size, dry_run, max_rows)


def retry_selected(
    selection: JobSelection,
    *,
    using: str,
    namespace: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    cursor: str | None = None,
    max_rows: int | None = None,
) -> BulkOutcome:
    """Retries every failed job ``selection`` picks (its stage must be ``failed``), as
    :func:`retry_failed` would, ``batch_size`` jobs per transaction; see
    :func:`_in_batches` for what holds, and for ``cursor`` and ``max_rows``."""
    if selection.stage != stages.FAILED:
        raise ValueError(f"only failed jobs can be retried, not stage {selection.stage!r}")
    walk = _walk(using, namespace, batch_size, dry_run, max_rows)
    return _in_batches(retry_record, selection, walk, cursor)


def run_now_selected(
    selection: JobSelection,
    *,
    using: str,
    namespace: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    cursor: str | None = None,
    max_rows: int | None = None,
) -> BulkOutcome:
    """Makes every delayed or requeued job ``selection`` picks ready now, as
    :func:`run_now` would, ``batch_size`` jobs per transaction; the stage must be one
    of :data:`BULK_RUN_NOW_STAGES`. See :func:`_in_batches`."""
    if selection.stage not in BULK_RUN_NOW_STAGES:
        raise ValueError(
            f"jobs of stage {selection.stage!r} cannot be run now; the stages that can: "
            f"{', '.join(BULK_RUN_NOW_STAGES)} (the jobs waiting for a time)"
        )
    walk = _walk(using, namespace, batch_size, dry_run, max_rows)
    return _in_batches(run_record_now, selection, walk, cursor)


def cancel_selected(
    selection: JobSelection,
    *,
    using: str,
    namespace: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    cursor: str | None = None,
    max_rows: int | None = None,
) -> BulkOutcome:
    """Cancels every job ``selection`` picks, as :func:`cancel_job` would (running
    jobs, and jobs on partitions, are asked to stop: counted in ``requested``),
    ``batch_size`` jobs per transaction; the stage must be a live one. Queued jobs
    are walked through their queue's unclaimed messages (cursor ``q:<sequence>``),
    then the partitioned ones through the job index; see :func:`_in_batches`."""
    if selection.stage not in BULK_CANCEL_STAGES:
        raise ValueError(
            f"jobs of stage {selection.stage!r} cannot be cancelled; the stages that can: "
            f"{', '.join(BULK_CANCEL_STAGES)} (finished jobs are done)"
        )
    walk = _walk(using, namespace, batch_size, dry_run, max_rows)
    in_queue = cursor is None or cursor.startswith(QUEUE_CURSOR)
    if selection.stage != stages.ENQUEUED or selection.job_ids is not None or not in_queue:
        return _in_batches(cancel_record, selection, walk, cursor)
    outcome = cancel_queued_in_batches(selection, walk, cursor)
    if outcome.resume_cursor is not None:
        return outcome
    # Jobs queued on partitions have index rows; the index lists no other queued job,
    # so a cancel through it only writes requests, which a dry run's writes discard.
    return _in_batches(cancel_record, selection, walk, None, outcome)


def delete_selected(
    selection: JobSelection,
    *,
    using: str,
    namespace: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    cursor: str | None = None,
    max_rows: int | None = None,
) -> BulkOutcome:
    """Deletes every job ``selection`` picks, as :func:`delete_job` would, ``batch_size``
    jobs per transaction; the stage must be one of :data:`BULK_DELETE_STAGES`."""
    if selection.stage not in BULK_DELETE_STAGES:
        raise ValueError(
            f"jobs of stage {selection.stage!r} cannot be deleted in bulk; the stages that "
            f"can: {', '.join(BULK_DELETE_STAGES)} (running jobs are held by a worker; "
            "queued jobs are listed by their queue, not by the job index)"
        )
    walk = _walk(using, namespace, batch_size, dry_run, max_rows)
    return _in_batches(delete_record, selection, walk, cursor)


def _in_batches(
    action: RecordAction,
    selection: JobSelection,
    walk: Walk,
    cursor: str | None,
    outcome: BulkOutcome | None = None,
) -> BulkOutcome:
    """Walks the stage's index rows newest first from ``cursor`` (exclusive; ``None``:
    from the newest, or from ``selection.until_ms``), ``batch_size`` per page, and
    acts on the selected jobs of each page in one transaction of their own (call
    outside a transaction so each batch commits as it goes). With
    ``selection.job_ids`` those jobs are taken instead, ``batch_size`` per
    transaction, and ``cursor`` is not used.

    Bounded: no transaction holds more than ``batch_size`` jobs, and the walk's
    keyset cursor moves past every page, so a job the action moves out of the stage
    and back (a retried job failing again) is newer than the cursor and not taken
    twice. With ``max_rows`` the walk stops once it has looked at that many index
    rows (matching or not) and sets ``outcome.resume_cursor``: pass it as ``cursor``
    to go on. A job that left the stage between the page's read and its lock is
    refused with the reason. With ``dry_run`` the same checks run on records read
    without a lock and nothing is written.
    """
    outcome = outcome or BulkOutcome()
    if selection.job_ids is not None:
        ids = list(dict.fromkeys(selection.job_ids))
        for start in range(0, len(ids), walk.batch_size):
            batch = ids[start : start + walk.batch_size]
            _act_on_batch(action, batch, selection, *walk.target(), outcome, walk.dry_run)
        return outcome
    index = walk.stores.index
    cursor = cursor or selection.first_cursor()
    while True:
        page = index.job_index_list_by_stage(
            walk.namespace, selection.stage, cursor, walk.page_size()
        )
        done = page.next_cursor is None
        if selection.since_ms is not None:
            done = done or any(row.stage_date_ms < selection.since_ms for row in page.items)
        rows = [row for row in page.items if selection.picks_row(row)]
        if rows:
            job_ids = [row.job_id for row in rows]
            _act_on_batch(action, job_ids, selection, *walk.target(), outcome, walk.dry_run)
        if done:
            return outcome
        cursor = page.next_cursor
        if walk.spend(len(page.items)):
            outcome.resume_cursor = cursor
            return outcome


def _act_on_batch(
    action: RecordAction,
    job_ids: list[str],
    selection: JobSelection,
    stores: Stores,
    namespace: str,
    outcome: BulkOutcome,
    dry_run: bool,
) -> None:
    """One transaction: the records of ``job_ids`` locked, filtered (queue, error), acted on."""
    # A dry run reads without locks and writes nothing: no transaction to hold.
    with contextlib.nullcontext() if dry_run else transaction.atomic(using=stores.using):
        found, undecodable = read_records_and_errors(
            stores.kv, namespace, job_ids, for_update=not dry_run
        )
        writes = JobWrites(namespace)
        now = now_ms()
        for job_id in job_ids:
            if job_id in undecodable:
                error = undecodable[job_id]
                refuse(outcome, f"job {job_id} has a record that cannot be decoded: {error}")
                continue
            record = found.get(job_id)
            if record is None:
                continue  # deleted, or expired, since the page was read
            if not selection.picks_record(record):
                continue
            outcome.matched += 1
            if record.stage != selection.stage:
                refuse(
                    outcome, f"job {job_id} is {record.stage!r} now, no longer {selection.stage!r}"
                )
                continue
            try:
                done = action(JobWrites(namespace) if dry_run else writes, record, stores, now)
            except ActionRefused as refused:
                refuse(outcome, str(refused))
                continue
            outcome.changed += 1
            outcome.requested += done == REQUESTED
        if not dry_run:
            commit_action(writes, stores)
    outcome.batches += 1
