"""Operator actions on one job, named by its id: the dashboard's buttons and
``api.cancel``/``api.cancel_many``.

Each is one transaction on the job's database (``cancel_many``: one per batch):
the record read under a row lock (PostgreSQL ``FOR UPDATE``; SQLite's write lock is
held by the transaction), its stage checked, every change written through the
engine, so the record, its index row, its schedule entry and its delivery message
change together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from later_django.core.clock import now_ms
from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record
from later_django.engine.job_actions.record_checks import (
    FINISHED,
    MISSING,
    UNREADABLE,
    RecordAction,
    cancel_record,
    commit_action,
    delete_record,
    retry_record,
    run_record_now,
)
from later_django.engine.job_actions.selection import DEFAULT_BATCH_SIZE
from later_django.engine.record_reads import read_records_and_errors
from later_django.engine.writes import JobWrites
from later_django.exceptions import ActionRefused, RecordDecodeError
from later_django.storage.stores import Stores, stores_for


def _locked_record(stores: Stores, namespace: str, job_id: str) -> JobRecord:
    """The job's record read under a row lock; ``ActionRefused`` when it is gone or
    cannot be decoded. Call inside ``transaction.atomic``."""
    raw = stores.kv.get_many_for_update([job_key(namespace, job_id)])
    data = raw.get(job_key(namespace, job_id))
    if data is None:
        raise ActionRefused(f"job {job_id} does not exist (deleted, or its record expired)")
    try:
        return decode_record(data)
    except RecordDecodeError as error:
        raise ActionRefused(f"job {job_id} has a record that cannot be decoded: {error}") from None


def _act_on_one(action: RecordAction, using: str, namespace: str, job_id: str) -> JobRecord:
    stores = stores_for(using)
    with transaction.atomic(using=using):
        record = _locked_record(stores, namespace, job_id)
        writes = JobWrites(namespace)
        action(writes, record, stores, now_ms())
        commit_action(writes, stores)
    return record


def retry_failed(using: str, namespace: str, job_id: str) -> JobRecord:
    """failed -> enqueued (an operator move): the job runs once more.

    The errors of earlier attempts are kept, so a retry policy whose retries
    are used up fails the job again at the next error rather than retrying.
    The job's continuations, released when it failed, are not run again.
    Returns the record as written.
    """
    return _act_on_one(retry_record, using, namespace, job_id)


def run_now(using: str, namespace: str, job_id: str) -> JobRecord:
    """delayed / requeued -> enqueued at once; its schedule entry is removed.

    Returns the record as written.
    """
    return _act_on_one(run_record_now, using, namespace, job_id)


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
    return _act_on_one(delete_record, using, namespace, job_id)


def cancel_job(using: str, namespace: str, job_id: str) -> str:
    """Cancels the job ``job_id``; returns what it did (one transaction):

    * :data:`CANCELLED`: it was delayed, waiting, requeued, or enqueued with its
      delivery message unclaimed. It is written ``cancelled`` and will never start;
      its ``on="success"`` continuations fail, its ``on="finish"`` ones become ready.
    * :data:`REQUESTED`: a worker may hold it (running, its message claimed at this
      instant, or it waits on a topic partition). A request is written; within
      :data:`~later_django.engine.cancellation.POLL_SECONDS` the worker holding it
      sets ``context.cancelled``, and the job is recorded ``cancelled`` whatever its
      task then returns (see :mod:`later_django.engine.cancellation`).
    * :data:`FINISHED` (nothing changed), :data:`MISSING`, or :data:`UNREADABLE` (its
      stored record cannot be decoded; the worker that meets it writes it failed).
    """
    return cancel_many(using, namespace, [job_id])[job_id]


def cancel_many(using: str, namespace: str, job_ids: Sequence[str]) -> dict[str, str]:
    """:func:`cancel_job` for each of ``job_ids``, :data:`DEFAULT_BATCH_SIZE` per
    transaction (call outside a transaction for the batches to commit as they go);
    what was done, by job id. ``job_ids`` may repeat (one answer per id)."""
    stores = stores_for(using)
    done: dict[str, str] = {}
    unique = list(dict.fromkeys(job_ids))
    for start in range(0, len(unique), DEFAULT_BATCH_SIZE):
        batch = unique[start : start + DEFAULT_BATCH_SIZE]
        with transaction.atomic(using=using):
            found, undecodable = read_records_and_errors(
                stores.kv, namespace, batch, for_update=True
            )
            writes = JobWrites(namespace)
            now = now_ms()
            for job_id in batch:
                record = found.get(job_id)
                if record is None:
                    done[job_id] = UNREADABLE if job_id in undecodable else MISSING
                    continue
                try:
                    done[job_id] = cancel_record(writes, record, stores, now)
                except ActionRefused:
                    done[job_id] = FINISHED
            commit_action(writes, stores)
    return done
