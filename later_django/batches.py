"""Batches: the jobs enqueued inside ``with batch(...)``, and callbacks that run once
when every one of them has finished.

::

    with batch(on_success=callback(mail_report, month), on_failure=callback(page_ops)):
        for account in accounts:
            bill.enqueue(account.id)
        enqueue_many(export, exports)      # members too

    @task
    def page_ops(outcome: BatchOutcome) -> None:
        ...  outcome.failed, outcome.failed_ids ...

The block runs in one transaction (``transaction.atomic`` on ``LATER["DATABASE"]``,
joining the caller's): the members and the callbacks commit together, so no member
runs before the batch is closed and a batch cannot complete while it is being
filled. At the block's end each callback is enqueued as a fan-in child of every
member (as ``api.after(..., on="finish")`` makes one) running :func:`fire_callback`,
which counts the members by outcome and calls the callback with a :class:`BatchOutcome` when its
rule holds: ``on_success`` when every member succeeded, ``on_failure`` when one failed
or was cancelled, ``on_finish`` always. Each fires at most once (the fan-in makes its
job ready exactly once) and never waits for ever: a member that fails, is cancelled
or exhausts its retries still finishes. A callback's job takes its task's backend,
queue and priority; its retries are ``LATER["RETRY"]``'s (the job runs
:func:`fire_callback`, which calls the callback's function in the same attempt).
A running member adds members with :func:`add`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from later_django.backend import LaterBackend
from later_django.compat.tasks import InvalidTask, Task, TaskContext, TaskResult, task
from later_django.conf import later_settings
from later_django.core import stages
from later_django.core.keys import children_key, member_child
from later_django.core.records import new_job_id
from later_django.engine import batch_scope, fan_in, workflows
from later_django.engine.record_reads import read_records
from later_django.engine.registry import resolve_task
from later_django.storage.ports.kv import KeyValuePort
from later_django.storage.stores import Stores, stores_for

#: A callback's rule -> the outcomes it fires on.
RULES = ("on_success", "on_failure", "on_finish")


@dataclass(frozen=True)
class Callback:
    """A task to call when a batch has finished, with its own arguments (after the
    :class:`BatchOutcome`, which comes first)."""

    task: Task
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def callback(task_: Task, *args: Any, **kwargs: Any) -> Callback:
    """``task_(outcome, *args, **kwargs)`` as a batch's callback."""
    return Callback(task_, args, kwargs)


@dataclass(frozen=True)
class BatchOutcome:
    """What a callback is given: the members counted by how they ended."""

    members: int
    succeeded: int
    failed: int
    cancelled: int
    #: Members that failed or were cancelled, in enqueue order.
    failed_ids: list[str]
    #: Members whose record was gone (deleted) when the callback ran.
    gone: int = 0


@dataclass
class Batch:
    """An open batch: its members so far; after the block, its callbacks' jobs."""

    members: list[str]
    #: The batch's workflow id: its jobs (members and callbacks) carry it.
    id: str
    callbacks: dict[str, TaskResult] = field(default_factory=dict)


@contextmanager
def batch(
    *,
    on_success: Callback | None = None,
    on_failure: Callback | None = None,
    on_finish: Callback | None = None,
    name: str = "",
) -> Iterator[Batch]:
    """Collects the jobs enqueued in the block (``enqueue``, ``enqueue_many``, any
    later_django enqueue) and enqueues the callbacks given (see the module). A batch
    with no member fires ``on_success`` and ``on_finish`` at once. ``ValueError``
    without a callback; ``RuntimeError`` inside another batch. An exception in the
    block rolls back its members with it."""
    given = {"on_success": on_success, "on_failure": on_failure, "on_finish": on_finish}
    chosen = {rule: cb for rule, cb in given.items() if cb is not None}
    if not chosen:
        raise ValueError("a batch needs a callback: on_success, on_failure or on_finish")
    for rule, cb in chosen.items():
        if not isinstance(cb, Callback):
            raise TypeError(f"{rule} must be callback(task, ...), got {cb!r}")
    settings = later_settings()
    workflow_id = new_job_id()
    with transaction.atomic(using=settings.database):
        with batch_scope.collecting(workflow_id) as members:
            opened = Batch(members, workflow_id)
            yield opened
        with batch_scope.joining(workflow_id):
            for rule, cb in chosen.items():
                opened.callbacks[rule] = _enqueue_callback(rule, cb, list(members))
        callbacks = {rule: result.id for rule, result in opened.callbacks.items()}
        row = workflows.new_row(workflow_id, "batch", name, callbacks)
        workflows.write_row(stores_for(settings.database), settings.namespace, row)


def _enqueue_callback(rule: str, cb: Callback, members: list[str]) -> TaskResult:
    """The job that fires ``cb`` by ``rule`` once every member has finished: a fan-in
    child of the members (also of a single one, so that :func:`add` can give it more),
    or ready at once without members."""
    firing = fire_callback.using(
        backend=cb.task.backend, queue_name=cb.task.queue_name, priority=cb.task.priority
    )
    arguments = (rule, cb.task.module_path, list(cb.args), cb.kwargs)
    if not members:
        return firing.enqueue(*arguments)
    backend = firing.get_backend()
    if not isinstance(backend, LaterBackend):
        raise InvalidTask(f"{rule}: task {cb.task.module_path} is not a LaterBackend task")
    job = backend.new_job(firing, arguments, {}, run_on="finish")
    parents = tuple(dict.fromkeys(members))
    return backend.write_jobs([firing], [dataclasses.replace(job, parent_job_ids=parents)])[0]


def add(context: TaskContext, task_: Task, *args: Any, **kwargs: Any) -> TaskResult:
    """Enqueues ``task_(*args, **kwargs)`` as one more member of the batch of the job
    running with ``context`` (a ``takes_context`` task that is a member): the batch's
    callbacks then wait for it too (dynamic fan-out). The new job, its edges to the
    callbacks and their counts are written in one transaction, while the running
    member holds the callbacks (it has not finished), so they cannot fire before the
    new member has finished. ``RuntimeError`` when the job is no member of a batch
    whose callbacks still wait. An added member may add more in turn."""
    settings = later_settings()
    stores = stores_for(settings.database)
    member_id = context.task_result.id
    with transaction.atomic(using=settings.database):
        callbacks, flow = _callbacks_of(stores, settings.namespace, member_id)
        if not callbacks:
            raise RuntimeError(
                f"job {member_id} is not a member of a batch whose callbacks still wait"
            )
        with batch_scope.joining(flow) if flow is not None else nullcontext():
            added = task_.enqueue(*args, **kwargs)
        fan_in.add_parent(stores, settings.namespace, callbacks, added.id)
    return added


def _callbacks_of(stores: Stores, namespace: str, member_id: str) -> tuple[list[str], str | None]:
    """The waiting batch callbacks (fan-in children running :func:`fire_callback`) in
    the member's children range, and the member's workflow id (its record is read
    with the callbacks', in one statement)."""
    key = children_key(namespace, member_id)
    members = stores.kv.range_members_many([key]).get(key, [])
    fan_ins = [child for child, all_of in map(member_child, members) if all_of]
    records = read_records(stores.kv, namespace, [*fan_ins, member_id])
    own = records.pop(member_id, None)
    waiting = [
        job_id
        for job_id, record in records.items()
        if record.task_path == fire_callback.module_path and record.stage == stages.WAITING
    ]
    return waiting, own.workflow_id if own is not None else None


@task(takes_context=True)
def fire_callback(
    context: TaskContext, rule: str, task_path: str, args: list[Any], kwargs: dict[str, Any]
) -> Any:
    """Counts the batch's members (this job's parents, read in one statement) and calls
    the callback at ``task_path`` with the :class:`BatchOutcome` when ``rule`` holds;
    returns the callback's value, or ``None`` when the rule did not hold."""
    settings = later_settings()
    kv = stores_for(settings.database).kv
    own = read_records(kv, settings.namespace, [context.task_result.id])
    record = own.get(context.task_result.id)
    parents: list[str] = []
    if record is not None:
        parents = record.parent_job_ids or [record.parent_job_id or ""]
    outcome = outcome_of([parent for parent in parents if parent], kv, settings.namespace)
    unsuccessful = outcome.failed + outcome.cancelled
    if (rule == "on_success" and unsuccessful) or (rule == "on_failure" and not unsuccessful):
        return None
    return resolve_task(task_path).call(outcome, *args, **kwargs)


def outcome_of(members: list[str], kv: KeyValuePort, namespace: str) -> BatchOutcome:
    """The members counted by stage, from their records (one read)."""
    records = read_records(kv, namespace, members)
    by_stage = [records[job].stage if job in records else None for job in members]
    return BatchOutcome(
        members=len(members),
        succeeded=by_stage.count(stages.SUCCESS),
        failed=by_stage.count(stages.FAILED),
        cancelled=by_stage.count(stages.CANCELLED),
        failed_ids=[
            job
            for job, stage in zip(members, by_stage, strict=True)
            if stage in stages.UNSUCCESSFUL
        ],
        gone=by_stage.count(None),
    )
