"""The checks and moves of one locked record, which the single and the bulk
actions share, and what a cancel reports.

Each ``*_record`` function is a :data:`RecordAction`: it checks the stage it finds
(``ActionRefused`` naming the job and the rule) and adds the job's moves to a
``JobWrites``, writing nothing itself; :func:`commit_action` writes them, the
continuations of jobs a cancel finished moving in the same transaction. Call them
inside the transaction that locked the record.
"""

from __future__ import annotations

from collections.abc import Callable

from later_django.conf import later_settings
from later_django.core import stages
from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.keys import children_key, due_key, job_key, undecodable_key
from later_django.core.records import JobRecord
from later_django.engine import cancellation, moves, parent_holds
from later_django.engine.continuations import commit_releasing_children
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import ActionRefused, RecordDecodeError
from later_django.storage.stores import Stores
from later_django.storage.types import Delete, RangeRemove

#: How far after the job became ready its delivery message may have been published.
_PUBLISH_WINDOW_MS = 60_000
#: Queue messages of the job's queue and priority looked at when deleting a queued job.
_MESSAGES_SEARCHED = 500
#: What a cancel did to one job (:func:`~later_django.engine.job_actions.one_job.cancel_job`).
CANCELLED = "cancelled"  # written cancelled: it will never start (again)
REQUESTED = "requested"  # a worker may hold it: asked to stop, recorded cancelled
FINISHED = "finished"  # it had finished already: nothing changed
MISSING = "missing"  # no such job (deleted, or its record expired)
UNREADABLE = "unreadable"  # its record cannot be decoded: the worker that meets it fails it
#: The reason a cancel by an operator records.
CANCEL_REASON = "cancelled by an operator"


def refuse_partitioned(record: JobRecord, action: str) -> None:
    if record.topic is not None:
        raise ActionRefused(
            f"job {record.job_id} is on partition {record.partition_id} of topic "
            f"{record.topic!r}; {action} is not offered for partitioned jobs, whose order "
            "the partition keeps"
        )


def retry_record(writes: JobWrites, record: JobRecord, stores: Stores, now: int) -> None:
    """failed -> enqueued, or ``ActionRefused``."""
    refuse_partitioned(record, "retry")
    if record.stage != stages.FAILED:
        raise ActionRefused(
            f"job {record.job_id} is {record.stage!r}; only a failed job can be retried"
        )
    # The stand-in of an undecodable record (moves.replace_undecodable) has no queue:
    # known from the record itself, without reading its marker key.
    if not record.queue_name:
        raise ActionRefused(
            f"job {record.job_id} failed because its stored record could not be decoded; "
            "there is nothing to run again"
        )
    moves.retry_failed(writes, record, now)
    # A child runs again: it keeps its parents (results) again until it finishes.
    parent_holds.hold(writes, record)


def delete_record(writes: JobWrites, record: JobRecord, stores: Stores, now: int) -> None:
    """Every row of the job, or ``ActionRefused``; see :func:`delete_job`."""
    namespace, job_id = record.namespace, record.job_id
    if record.stage not in stages.FINISHED:
        refuse_partitioned(record, "delete of a live job")
    if record.stage == stages.RUNNING:
        raise ActionRefused(
            f"job {job_id} is running on a worker; wait until it finishes, then delete it"
        )
    # A finished job's continuations were moved when it finished.
    if record.stage not in stages.FINISHED:
        waiting_children = stores.kv.range_count(children_key(namespace, job_id))
        if waiting_children:
            raise ActionRefused(
                f"job {job_id} has {waiting_children} continuation(s) waiting for it; "
                "delete those first"
            )
    if record.stage == stages.ENQUEUED and record.topic is None:
        delete_queue_message(stores, record)
    writes.add(Delete(job_key(namespace, job_id)))
    writes.add(Delete(undecodable_key(namespace, job_id)))
    if record.stage in (stages.DELAYED, stages.REQUEUED) and record.run_after_ms is not None:
        writes.add(Delete(due_key(namespace, record.run_after_ms, job_id)))
    if record.stage not in stages.FINISHED:
        # It will never finish: its parents are no longer kept for it.
        parent_holds.release(writes, [record], stores)
    if record.parent_job_id is not None and record.stage == stages.WAITING:
        writes.add(RangeRemove(children_key(namespace, record.parent_job_id), job_id.encode()))
    writes.unindex(job_id)
    writes.uncount(record)


def cancel_record(writes: JobWrites, record: JobRecord, stores: Stores, now: int) -> str:
    """A live job cancelled (:data:`CANCELLED`) or, where a worker may hold it, a
    request written (:data:`REQUESTED`); ``ActionRefused`` for a finished job."""
    if record.stage in stages.FINISHED:
        raise ActionRefused(f"job {record.job_id} has finished ({record.stage}); nothing to cancel")
    if record.stage == stages.RUNNING or record.topic is not None:
        writes.add(cancellation.request(record))
        return REQUESTED
    if record.stage == stages.ENQUEUED and not delete_queue_message(stores, record):
        # Claimed at this instant (or not found): the worker that starts it cancels it.
        writes.add(cancellation.request(record))
        return REQUESTED
    if record.stage in (stages.DELAYED, stages.REQUEUED) and record.run_after_ms is not None:
        moves.unschedule(writes, record, record.run_after_ms)
    moves.cancel(writes, record, now, CANCEL_REASON, later_settings())
    return CANCELLED


def run_record_now(writes: JobWrites, record: JobRecord, stores: Stores, now: int) -> None:
    refuse_partitioned(record, "run now")
    if record.stage not in (stages.DELAYED, stages.REQUEUED):
        raise ActionRefused(
            f"job {record.job_id} is {record.stage!r}; only a delayed or requeued job "
            "can be run now"
        )
    if record.run_after_ms is not None:
        moves.unschedule(writes, record, record.run_after_ms)
    moves.make_ready(writes, record, now)


#: An action on one locked record; it may return what it did (a cancel's kind).
RecordAction = Callable[[JobWrites, JobRecord, Stores, int], str | None]


def commit_action(writes: JobWrites, stores: Stores) -> None:
    """Commits an action's writes; a cancel finishes jobs, and their continuations
    move in the same transaction."""
    if writes.finished_records():
        commit_releasing_children(writes, stores, later_settings())
    else:
        commit(writes, stores)


def delete_queue_message(stores: Stores, record: JobRecord) -> bool:
    """Deletes the unclaimed delivery message of the queued ``record``; ``True`` if found.

    The message has no job-id column: it is searched among the unclaimed
    messages of the job's queue and priority published within a minute after
    the job became ready (at most ``_MESSAGES_SEARCHED``, read through the
    claim index), and recognised by its decoded command.
    """
    ready_at = record.ready_at_ms or record.stage_at_ms
    candidates = stores.dashboard.unclaimed_messages_published_between(
        record.namespace,
        record.queue_name,
        record.priority,
        ready_at,
        ready_at + _PUBLISH_WINDOW_MS,
        _MESSAGES_SEARCHED,
    )
    for sequence, payload in candidates:
        try:
            command = decode_command(payload)
        except RecordDecodeError:
            continue
        if isinstance(command, ExecuteJob) and command.job_id == record.job_id:
            return stores.queue.delete_unclaimed(sequence)
    return False
