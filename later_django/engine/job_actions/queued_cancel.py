"""The bulk cancel of queued jobs, walked through the job queues' unclaimed
delivery messages (queued jobs have no index row): each message deleted only while
still unclaimed, its job written cancelled in the same transaction, so a message a
worker claims meanwhile is left to it.
"""

from __future__ import annotations

import contextlib

from django.db import transaction

from later_django.conf import LaterSettings, later_settings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.commands import ExecuteJob, decode_command
from later_django.engine import moves
from later_django.engine.job_actions.record_checks import CANCEL_REASON, commit_action
from later_django.engine.job_actions.selection import (
    QUEUE_CURSOR,
    BulkOutcome,
    JobSelection,
    Walk,
    refuse,
)
from later_django.engine.record_reads import read_records
from later_django.engine.writes import JobWrites
from later_django.exceptions import RecordDecodeError


def cancel_queued_in_batches(
    selection: JobSelection, walk: Walk, cursor: str | None
) -> BulkOutcome:
    """Cancels the selected jobs of the job queues' unclaimed messages, newest first
    from ``cursor`` (``q:<sequence>``, exclusive; ``None``: the newest),
    ``batch_size`` messages per transaction: each message deleted (only while still
    unclaimed) and its job written cancelled in one transaction, so a message a
    worker claims meanwhile is left to it, its job refused with the reason. Bounded
    like :func:`_in_batches`: the walk's cursor (the sequence) only goes down, and
    ``max_rows`` counts the messages looked at."""
    outcome = BulkOutcome()
    before = None if cursor is None else _queue_sequence(cursor)
    settings = later_settings()
    while True:
        size = walk.page_size()
        messages = walk.stores.index.queued_messages(walk.namespace, before, size)
        if not messages:
            return outcome
        before = messages[-1].sequence
        picked: list[tuple[int, str]] = []
        for message in messages:
            try:
                command = decode_command(message.payload)
            except RecordDecodeError:
                continue
            if isinstance(command, ExecuteJob) and selection.picks_task(command.payload_type):
                picked.append((message.sequence, command.job_id))
        if picked:
            _cancel_queued(picked, selection, walk, outcome, settings)
        if len(messages) < size:
            return outcome
        if walk.spend(len(messages)):
            outcome.resume_cursor = f"{QUEUE_CURSOR}{before}"
            return outcome


def _queue_sequence(cursor: str) -> int:
    """The sequence of a ``q:<sequence>`` cursor; ``ValueError`` naming it otherwise."""
    try:
        return int(cursor.removeprefix(QUEUE_CURSOR))
    except ValueError:
        raise ValueError(
            f"not a queue cursor: {cursor!r} (expected {QUEUE_CURSOR}<sequence>)"
        ) from None


def _cancel_queued(
    picked: list[tuple[int, str]],
    selection: JobSelection,
    walk: Walk,
    outcome: BulkOutcome,
    settings: LaterSettings,
) -> None:
    """One transaction of :func:`cancel_queued_in_batches`: the records locked, filtered
    (queue, error, time), each message deleted while unclaimed, the job cancelled."""
    stores, namespace, dry_run = walk.stores, walk.namespace, walk.dry_run
    with contextlib.nullcontext() if dry_run else transaction.atomic(using=stores.using):
        # An undecodable record is left out (and logged): its worker fails it.
        found = read_records(
            stores.kv, namespace, [job_id for _, job_id in picked], for_update=not dry_run
        )
        writes = JobWrites(namespace)
        now = now_ms()
        for sequence, job_id in picked:
            record = found.get(job_id)
            if record is None or record.stage != stages.ENQUEUED:
                continue
            if not (selection.picks_record(record) and selection.picks_time(record.stage_at_ms)):
                continue
            outcome.matched += 1
            if not dry_run and not stores.queue.delete_unclaimed(sequence):
                refuse(outcome, f"job {job_id} was claimed by a worker meanwhile")
                continue
            if not dry_run:
                moves.cancel(writes, record, now, CANCEL_REASON, settings)
            outcome.changed += 1
        if not dry_run:
            commit_action(writes, stores)
    outcome.batches += 1
