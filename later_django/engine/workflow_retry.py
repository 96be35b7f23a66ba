"""A workflow's retry: its failed and cancelled jobs, and every job downstream of them,
run again; what succeeded upstream of them is kept.

In one transaction, with the workflow's records read under row locks:

* the jobs to run again are the failed and cancelled ones and, transitively, every
  child of one of those in the workflow (whatever its stage: a batch callback that
  ran while a member had failed runs again once the member has);
* each of them, in the order they joined the workflow (parents first), moves back:
  to ``enqueued`` when none of its parents runs again, else to ``waiting``,
  registered with each parent that runs again exactly as ``continue_with`` or
  ``after`` registers a child (its member in the parent's children range; a fan-in
  child's pending count set to those parents); its parents are held again for it.

A workflow with a job still live (running, waiting, queued) is refused: a retry is for
a workflow that has come to rest (cancel it first to stop it). A workflow the
``workflows`` pass has settled is live again (``engine.workflow_rest.wake``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import transaction

from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import children_key, fan_in_member, pending_parents_key
from later_django.core.records import JobRecord
from later_django.engine import moves, parent_holds, workflow_rest, workflows
from later_django.engine.record_reads import read_records
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import ActionRefused
from later_django.storage.stores import stores_for
from later_django.storage.types import Delete, Increment, RangeAdd


def parents_of(record: JobRecord) -> list[str]:
    """The jobs ``record`` waits for: a fan-in child's parents, a continuation's one."""
    if record.parent_job_ids:
        return list(record.parent_job_ids)
    return [record.parent_job_id] if record.parent_job_id else []


def downstream(ids: Sequence[str], records: Mapping[str, JobRecord]) -> list[str]:
    """The failed and cancelled jobs of ``ids`` and every job of ``ids`` below one of
    them, in the order of ``ids`` (a workflow's join order has parents first)."""
    chosen: set[str] = set()
    for job_id in ids:
        record = records.get(job_id)
        if record is None:
            continue
        if record.stage in stages.UNSUCCESSFUL or any(p in chosen for p in parents_of(record)):
            chosen.add(job_id)
    return [job_id for job_id in ids if job_id in chosen]


def retry(using: str, namespace: str, workflow_id: str) -> list[str]:
    """Runs again the failed and cancelled jobs of ``workflow_id`` and what lies
    downstream of them (see the module), in one transaction; returns their ids in
    join order (empty: nothing failed or was cancelled). ``ActionRefused`` when a
    job of the workflow is live, or one to run again is on a topic partition or
    has no readable record; nothing is written then."""
    stores = stores_for(using)
    with transaction.atomic(using=using):
        woken = workflow_rest.wake(stores.kv, namespace, workflow_id)
        ids = workflows.job_ids(stores, namespace, workflow_id)
        records = read_records(stores.kv, namespace, ids, for_update=True)
        live = [job_id for job_id, record in records.items() if record.stage in stages.LIVE_STAGES]
        if live:
            raise ActionRefused(
                f"workflow {workflow_id} has {len(live)} job(s) not finished "
                f"(e.g. {live[0]}); wait for them, or cancel the workflow, then retry"
            )
        again = downstream(ids, records)
        if not again:
            return []
        for job_id in again:
            _refuse_unretriable(records[job_id])
        writes = JobWrites(namespace)
        for operation in woken:
            writes.add(operation)
        now = now_ms()
        rerun = set(again)
        for job_id in again:
            record = records[job_id]
            waits_for = [parent for parent in parents_of(record) if parent in rerun]
            if not waits_for:
                moves.rerun(writes, record, now, stages.ENQUEUED)
            else:
                moves.rerun(writes, record, now, stages.WAITING)
                _register(writes, record, waits_for)
            parent_holds.hold(writes, record)
        commit(writes, stores)
    return again


def _register(writes: JobWrites, record: JobRecord, parents: Sequence[str]) -> None:
    """``record`` waits for ``parents`` as its enqueue would have made it wait."""
    namespace = record.namespace
    if not record.parent_job_ids:
        writes.add(RangeAdd(children_key(namespace, parents[0]), record.job_id.encode()))
        return
    member = fan_in_member(record.job_id)
    for parent_id in parents:
        writes.add(RangeAdd(children_key(namespace, parent_id), member))
    pending = pending_parents_key(namespace, record.job_id)
    # A count left by an earlier wait (a child cancelled while waiting) is replaced:
    # the batch writes Deletes before Increments.
    writes.add(Delete(pending))
    writes.add(Increment(pending, len(parents)))


def _refuse_unretriable(record: JobRecord) -> None:
    if record.topic is not None:
        raise ActionRefused(
            f"job {record.job_id} is on partition {record.partition_id} of topic "
            f"{record.topic!r}; a retry would skip the partition's order"
        )
    if not record.queue_name:
        raise ActionRefused(
            f"job {record.job_id} failed because its stored record could not be decoded; "
            "there is nothing to run again"
        )
