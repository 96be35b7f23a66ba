"""The dashboard's job actions: retry a failed job, run a delayed job now, delete a job.

Each action is one transaction on the job's database: it reads the record
under a row lock (PostgreSQL ``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE``
holds the write lock), checks the stage it found, and writes every change
through the engine (:mod:`later_django.engine.moves`,
:func:`later_django.engine.writes.commit`), so the record, its index row, its
schedule entry and its delivery message change together or not at all.

Jobs on a topic partition are refused, except deleting a finished one: the
partition's order (head, sequence, lease) is the partition code's to keep, and
a retried or re-run job would have to go back through its partition.
"""

from __future__ import annotations

from django.db import transaction

from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.keys import children_key, due_key, job_key, undecodable_key
from later_django.core.records import JobRecord, decode_record
from later_django.engine import moves
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import ActionRefused, RecordDecodeError
from later_django.storage.stores import stores_for
from later_django.storage.types import Delete, RangeRemove

#: How far after the job became ready its delivery message may have been published.
_PUBLISH_WINDOW_MS = 60_000
#: Queue messages of the job's queue and priority looked at when deleting a queued job.
_MESSAGES_SEARCHED = 500


def _locked_record(using: str, namespace: str, job_id: str) -> JobRecord:
    """The job's record read under a row lock; ``ActionRefused`` when it is gone or
    cannot be decoded. Call inside ``transaction.atomic``."""
    raw = stores_for(using).kv.get_many_for_update([job_key(namespace, job_id)])
    data = raw.get(job_key(namespace, job_id))
    if data is None:
        raise ActionRefused(f"job {job_id} does not exist (deleted, or its record expired)")
    try:
        return decode_record(data)
    except RecordDecodeError as error:
        raise ActionRefused(f"job {job_id} has a record that cannot be decoded: {error}") from None


def _refuse_partitioned(record: JobRecord, action: str) -> None:
    if record.topic is not None:
        raise ActionRefused(
            f"job {record.job_id} is on partition {record.partition_id} of topic "
            f"{record.topic!r}; {action} is not offered for partitioned jobs, whose order "
            "the partition keeps"
        )


def retry_failed(using: str, namespace: str, job_id: str) -> JobRecord:
    """failed -> enqueued (an operator move): the job runs once more.

    The errors of earlier attempts are kept, so a retry policy whose retries
    are used up fails the job again at the next error rather than retrying.
    The job's continuations, released when it failed, are not run again.
    Returns the record as written.
    """
    now = now_ms()
    with transaction.atomic(using=using):
        record = _locked_record(using, namespace, job_id)
        _refuse_partitioned(record, "retry")
        if record.stage != stages.FAILED:
            raise ActionRefused(
                f"job {job_id} is {record.stage!r}; only a failed job can be retried"
            )
        if not record.queue_name or stores_for(using).kv.exist(undecodable_key(namespace, job_id)):
            raise ActionRefused(
                f"job {job_id} failed because its stored record could not be decoded; "
                "there is nothing to run again"
            )
        writes = JobWrites(namespace)
        moves.retry_failed(writes, record, now)
        commit(writes, stores_for(using))
    return record


def run_now(using: str, namespace: str, job_id: str) -> JobRecord:
    """delayed / requeued -> enqueued at once; its schedule entry is removed.

    Returns the record as written.
    """
    now = now_ms()
    with transaction.atomic(using=using):
        record = _locked_record(using, namespace, job_id)
        _refuse_partitioned(record, "run now")
        if record.stage not in (stages.DELAYED, stages.REQUEUED):
            raise ActionRefused(
                f"job {job_id} is {record.stage!r}; only a delayed or requeued job can be run now"
            )
        writes = JobWrites(namespace)
        if record.run_after_ms is not None:
            moves.unschedule(writes, record, record.run_after_ms)
        moves.make_ready(writes, record, now)
        commit(writes, stores_for(using))
    return record


def delete_job(using: str, namespace: str, job_id: str) -> JobRecord:
    """Deletes the job: record, index row, schedule entry, delivery message, and its
    membership in its parent's continuations; returns the record as it was.

    Refused for a running job (a worker holds it), for a job that still has
    continuations waiting for it (delete those first), and for a live job on a
    topic partition. The delivery message of a queued job is looked up among
    the queue's messages published when the job became ready; if it is not
    found (handed back later, or being claimed) it stays, and the worker that
    claims it drops it because the record is gone.
    """
    with transaction.atomic(using=using):
        record = _locked_record(using, namespace, job_id)
        if record.stage not in stages.FINISHED:
            _refuse_partitioned(record, "delete of a live job")
        if record.stage == stages.RUNNING:
            raise ActionRefused(
                f"job {job_id} is running on a worker; wait until it finishes, then delete it"
            )
        waiting_children = stores_for(using).kv.range_count(children_key(namespace, job_id))
        if waiting_children:
            raise ActionRefused(
                f"job {job_id} has {waiting_children} continuation(s) waiting for it; "
                "delete those first"
            )
        if record.stage == stages.ENQUEUED and record.topic is None:
            _delete_queue_message(using, namespace, record)
        writes = JobWrites(namespace)
        writes.add(Delete(job_key(namespace, job_id)))
        writes.add(Delete(undecodable_key(namespace, job_id)))
        if record.stage in (stages.DELAYED, stages.REQUEUED) and record.run_after_ms is not None:
            writes.add(Delete(due_key(namespace, record.run_after_ms, job_id)))
        if record.parent_job_id is not None and record.stage == stages.WAITING:
            writes.add(RangeRemove(children_key(namespace, record.parent_job_id), job_id.encode()))
        writes.unindex(job_id)
        commit(writes, stores_for(using))
    return record


def _delete_queue_message(using: str, namespace: str, record: JobRecord) -> bool:
    """Deletes the unclaimed delivery message of the queued ``record``; ``True`` if found.

    The message has no job-id column: it is searched among the unclaimed
    messages of the job's queue and priority published within a minute after
    the job became ready (at most ``_MESSAGES_SEARCHED``, read through the
    claim index), and recognised by its decoded command.
    """
    ready_at = record.ready_at_ms or record.stage_at_ms
    candidates = stores_for(using).dashboard.unclaimed_messages_published_between(
        namespace,
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
            return stores_for(using).queue.delete_unclaimed(sequence)
    return False
