"""Putting new jobs in: one transaction for a whole batch, on the caller's connection.

Inside the caller's ``transaction.atomic()`` the jobs commit or roll back with
the caller's data and nothing reaches a worker before the commit. The
statements are the same for one job or ten thousand: one write of the records
(and schedule entries), one of index rows when any job needs one, and one
publish per (queue, priority) of the batch, carrying the PostgreSQL wake-up.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from django.db import transaction

from later_django.compat.tasks import Task, TaskResult
from later_django.conf import LaterSettings, later_settings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import children_key, job_key
from later_django.core.records import JobRecord, decode_record, new_job_ids
from later_django.core.unique import UniqueKey
from later_django.engine import (
    batch_scope,
    fan_in,
    metrics,
    moves,
    parent_holds,
    partitions,
    tracing,
    workflow_members,
)
from later_django.engine.unique import claim_unique_keys
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import LaterError, ParentNotFound, TopicLayoutMismatch
from later_django.storage.stores import Stores
from later_django.storage.types import RangeAdd

CONTINUE_ON = ("success", "finish")


@dataclass(frozen=True)
class NewJob:
    """A job to enqueue: its task path and JSON-compatible arguments (already checked)."""

    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    queue_name: str
    priority: int
    backend: str
    run_after_ms: int | None = None
    retry: dict[str, Any] | None = None
    parent_job_id: str | None = None
    run_on: str | None = None
    #: A fan-in child's distinct parents (``api.after``; ``parent_job_id`` is then None).
    parent_job_ids: tuple[str, ...] | None = None
    #: The topic whose partition orders this job (``None``: an ordinary job).
    topic: str | None = None
    #: Chooses the partition of ``topic`` (see ``engine.topics.partition_for_key``).
    partition_key: str | bytes | int | None = None
    #: The recurring schedule that made this job, copied to the record.
    recurring_id: str | None = None
    #: The unique key this job holds (``None``: not a unique job); see ``engine.unique``.
    unique: UniqueKey | None = None
    #: The job's id when the caller chose it (a unique job's, to tell it from the
    #: holder an enqueue may return); ``None``: a new ULID.
    job_id: str | None = None

    def with_arguments(self, args: list[Any], kwargs: dict[str, Any]) -> NewJob:
        """This job with other (already checked) arguments: what ``enqueue_many``
        makes per call. Built without ``__init__``, whose frozen assignments (one
        ``object.__setattr__`` per field) would be most of its cost."""
        job = object.__new__(NewJob)
        fields = self.__dict__.copy()
        fields["args"], fields["kwargs"] = args, kwargs
        object.__setattr__(job, "__dict__", fields)
        return job


@runtime_checkable
class JobBackend(Protocol):
    """What the engine needs of the ``django.tasks`` backend whose jobs it writes
    (``LaterBackend``): a task call checked and described as a :class:`NewJob`,
    and the write of such jobs (with ``task_enqueued`` sent on commit)."""

    alias: str

    def new_job(self, task: Task, args: Sequence[Any], kwargs: dict[str, Any]) -> NewJob: ...

    def write_jobs(self, tasks: Sequence[Task], jobs: Sequence[NewJob]) -> list[TaskResult]: ...


def enqueue_jobs(jobs: Sequence[NewJob], *, stores: Stores, namespace: str) -> list[JobRecord]:
    """Writes ``jobs`` in one transaction and returns their records (in order).

    A job with ``run_after_ms`` in the future starts ``delayed``; one with a
    parent starts ``waiting`` (or, when the parent has already finished, is
    enqueued at once, or fails with ``parent <id> failed`` when the parent
    failed and ``run_on`` is ``success``); a fan-in child (``parent_job_ids``) likewise
    by all its parents (see :mod:`~later_django.engine.fan_in`; it enters no
    partition); the rest start ``enqueued``.
    Raises ``ParentNotFound`` (writing nothing) for an unknown parent.

    A job with a ``topic`` goes to the partition its ``partition_key`` routes to
    (``TopicNotConfigured`` before anything is written when the topic is not in
    ``LATER["TOPICS"]``, ``TopicLayoutMismatch`` when its stored partition count
    differs) and gets the partition's next sequence in this transaction. A
    continuation of a partitioned parent joins the parent's topic and partition
    (whatever its own topic), behind the parent, so it runs after the parent and
    before anything enqueued to that partition later.
    """
    if not jobs:
        return []
    settings = later_settings()
    # One call for the batch: ids of one millisecond share their first characters.
    fresh_ids = new_job_ids(len(jobs))
    job_ids = [job.job_id or fresh for job, fresh in zip(jobs, fresh_ids, strict=True)]
    tracer = tracing.active_tracer(settings)
    if tracer is None:
        return _enqueue(jobs, job_ids, stores, namespace, settings, None)
    with tracing.enqueue_span(
        tracer,
        [job.task_path for job in jobs],
        [job.queue_name for job in jobs],
        job_ids,
    ) as trace:
        return _enqueue(jobs, job_ids, stores, namespace, settings, trace)


def _enqueue(
    jobs: Sequence[NewJob],
    job_ids: list[str],
    stores: Stores,
    namespace: str,
    settings: LaterSettings,
    trace: dict[str, str] | None,
) -> list[JobRecord]:
    """:func:`enqueue_jobs` past the tracing decision; ``trace``: the carrier every
    written record stores (None: none)."""
    # Routing first: an unknown topic raises before anything is read or written.
    routes = [
        partitions.route(job.topic, job.partition_key, settings) if job.topic is not None else None
        for job in jobs
    ]
    # Lists, not generators: these look at every job of a batch (a generator pays a
    # call per job).
    unique = any([job.unique is not None for job in jobs])
    # Without parents, partitions or unique keys there is one write (on PostgreSQL
    # one statement, atomic by itself), which commit() wraps in a transaction when
    # it needs one.
    with (
        transaction.atomic(using=stores.using, savepoint=False)
        if _needs_transaction(jobs, routes, unique)
        else nullcontext()
    ):
        duplicates = (
            claim_unique_keys(
                [(job.task_path, job.unique) for job in jobs], job_ids, stores, namespace
            )
            if unique
            else {}
        )
        fresh: list[int] = []
        if duplicates:
            fresh = [position for position in range(len(jobs)) if position not in duplicates]
            jobs, routes = [jobs[i] for i in fresh], [routes[i] for i in fresh]
            job_ids = [job_ids[i] for i in fresh]
        records, missing = _place_and_write(
            jobs, job_ids, routes, stores, namespace, settings, trace
        )
    if missing is not None:
        raise missing
    if duplicates:
        return _with_duplicates(records, fresh, duplicates)
    return records


def _needs_transaction(jobs: Sequence[NewJob], routes: list[int | None], unique: bool) -> bool:
    """Whether the enqueue reads before it writes (unique keys, parents, partitions),
    so its reads and writes need one transaction."""
    return (
        unique
        or any([job.parent_job_id is not None or job.parent_job_ids for job in jobs])
        or routes.count(None) != len(routes)
    )


def _place_and_write(
    jobs: Sequence[NewJob],
    job_ids: list[str],
    routes: list[int | None],
    stores: Stores,
    namespace: str,
    settings: LaterSettings,
    trace: dict[str, str] | None,
) -> tuple[list[JobRecord], LaterError | None]:
    """Reads the parents, places the jobs (partition sequences allocated) and writes
    them: their records, and None; or no record and the ``ParentNotFound`` or
    ``TopicLayoutMismatch`` met before anything was written, which the caller raises."""
    try:
        parents = _parents(jobs, stores, namespace)
        placements = _placements(jobs, routes, parents)
        sequences = partitions.allocate_sequences(
            [placement for placement in placements if placement is not None],
            stores=stores,
            namespace=namespace,
            settings=settings,
        )
    except (ParentNotFound, TopicLayoutMismatch) as error:
        # Raised after the caller's block: raised through it, it would mark the
        # caller's transaction for rollback although no job was written.
        return [], error
    records = _write_new(
        jobs, job_ids, placements, iter(sequences), parents, stores, namespace, settings, trace
    )
    return records, None


def _with_duplicates(
    written: list[JobRecord], fresh: list[int], duplicates: dict[int, JobRecord | int]
) -> list[JobRecord]:
    """Every position's record: the written ones, and for a duplicate its holder's."""
    by_position = dict(zip(fresh, written, strict=True))
    for position, holder in duplicates.items():  # an int names an earlier, written job
        by_position[position] = by_position[holder] if isinstance(holder, int) else holder
    return [by_position[position] for position in range(len(by_position))]


def _write_new(
    jobs: Sequence[NewJob],
    job_ids: Sequence[str],
    placements: Sequence[tuple[str, int] | None],
    sequences: Iterator[int],
    parents: dict[str, JobRecord],
    stores: Stores,
    namespace: str,
    settings: LaterSettings,
    trace: dict[str, str] | None,
) -> list[JobRecord]:
    """Places every job in its first stage and commits them; their records, in order."""
    now = now_ms()
    writes = JobWrites(namespace)
    flow = batch_scope.workflow_id()
    if not parents and placements.count(None) == len(placements):
        # The common case (enqueue_many's): no parents, no partitions.
        records = _new_records(jobs, job_ids, namespace, now, trace)
        if flow is not None:
            workflow_members.join(writes, records, flow)
        ready = [record for record in records if record.stage == stages.ENQUEUED]
        if len(ready) != len(records):
            for record in records:
                if record.stage != stages.ENQUEUED:
                    moves.place_new(writes, record, now)
        moves.place_ready(writes, ready, now)
    else:
        records = []
        for job, job_id, placement in zip(jobs, job_ids, placements, strict=True):
            record = _new_record(job, job_id, namespace, now, trace)
            if flow is not None:
                workflow_members.join(writes, [record], flow)
            if placement is not None:
                record.topic, record.partition_id = placement
                record.sequence = next(sequences)
            records.append(record)
            if job.parent_job_ids:
                fan_in.place(writes, record, parents, now, settings)
            elif job.parent_job_id is None:
                moves.place_new(writes, record, now)
            else:
                parent = parents.get(job.parent_job_id)
                _place(writes, record, job, parent, placement is not None, now, settings)
            parent_holds.hold(writes, record)
    writes.on_commit(metrics.flush_if_due)
    commit(writes, stores)
    return records


def _new_records(
    jobs: Sequence[NewJob],
    job_ids: Sequence[str],
    namespace: str,
    now: int,
    trace: dict[str, str] | None,
) -> list[JobRecord]:
    """:func:`_new_record` of every job. A job that differs from the one before only
    in its arguments (``enqueue_many``'s, made by ``NewJob.with_arguments``: the same
    objects in every other field) gets a copy of the record before with its own id,
    arguments and lists, made without ``JobRecord.__init__``."""
    records: list[JobRecord] = []
    last: NewJob | None = None
    fields: dict[str, Any] = {}
    new = object.__new__
    for job, job_id in zip(jobs, job_ids, strict=True):
        if (
            last is not None
            and job.task_path is last.task_path
            and job.queue_name is last.queue_name
            and job.priority is last.priority
            and job.backend is last.backend
            and job.run_after_ms is last.run_after_ms
            and job.retry is last.retry
            and job.parent_job_id is last.parent_job_id
            and job.run_on is last.run_on
            and job.parent_job_ids is last.parent_job_ids
            and job.recurring_id is last.recurring_id
        ):
            record = new(JobRecord)
            values = fields.copy()
            values["job_id"], values["args"], values["kwargs"] = job_id, job.args, job.kwargs
            values["history"], values["errors"], values["worker_ids"] = [], [], []
            record.__dict__ = values
        else:
            record = _new_record(job, job_id, namespace, now, trace)
            last, fields = job, record.__dict__.copy()
        records.append(record)
    return records


def _place(
    writes: JobWrites,
    record: JobRecord,
    job: NewJob,
    parent: JobRecord | None,
    partitioned: bool,
    now: int,
    settings: LaterSettings,
) -> None:
    """A new job's moves: its first stage, or, behind a finished parent, ready or failed."""
    if parent is None:
        moves.place_new(writes, record, now)
    elif parent.stage not in stages.FINISHED:
        moves.place_new(writes, record, now)
        writes.add(RangeAdd(children_key(record.namespace, parent.job_id), record.job_id.encode()))
    elif parent.stage in stages.UNSUCCESSFUL and job.run_on == "success":
        moves.fail_waiting(writes, record, now, f"parent {parent.job_id} {parent.stage}", settings)
    else:
        if partitioned:
            # Enters its partition waiting, then is ready at once.
            moves.place_new(writes, record, now)
        moves.make_ready(writes, record, now)


def _placements(
    jobs: Sequence[NewJob],
    routes: Sequence[int | None],
    parents: dict[str, JobRecord],
) -> list[tuple[str, int] | None]:
    """Each job's ``(topic, partition_id)``, or None: its own route, or its
    partitioned parent's partition. A child that fails at once (its parent failed or
    was cancelled) enters no partition."""
    if not parents and routes.count(None) == len(routes):
        return [None] * len(jobs)
    placements: list[tuple[str, int] | None] = []
    for job, route in zip(jobs, routes, strict=True):
        parent = parents.get(job.parent_job_id) if job.parent_job_id is not None else None
        if parent is not None and parent.stage in stages.UNSUCCESSFUL and job.run_on == "success":
            placements.append(None)
        elif parent is not None and parent.topic is not None and parent.partition_id is not None:
            placements.append((parent.topic, parent.partition_id))
        elif job.topic is not None and route is not None:
            placements.append((job.topic, route))
        else:
            placements.append(None)
    return placements


def _new_record(
    job: NewJob, job_id: str, namespace: str, now: int, trace: dict[str, str] | None
) -> JobRecord:
    if job.parent_job_id is not None or job.parent_job_ids:
        stage = stages.WAITING
    elif job.run_after_ms is not None and job.run_after_ms > now:
        stage = stages.DELAYED
    else:
        stage = stages.ENQUEUED
    return JobRecord(
        job_id=job_id,
        namespace=namespace,
        task_path=job.task_path,
        args=job.args,
        kwargs=job.kwargs,
        queue_name=job.queue_name,
        priority=job.priority,
        backend=job.backend,
        stage=stage,
        stage_at_ms=now,
        created_at_ms=now,
        run_after_ms=job.run_after_ms,
        retry=job.retry,
        parent_job_id=job.parent_job_id,
        run_on=job.run_on,
        recurring_id=job.recurring_id,
        trace=trace,
        parent_job_ids=list(job.parent_job_ids) if job.parent_job_ids else None,
    )


def _parents(jobs: Sequence[NewJob], stores: Stores, namespace: str) -> dict[str, JobRecord]:
    """The parents' records, read under a row lock on PostgreSQL (SQLite holds the
    write lock already), so a parent cannot finish between this read and the
    child's registration: its finishing worker waits, then sees the child."""
    parent_ids = sorted(
        {job.parent_job_id for job in jobs if job.parent_job_id is not None}.union(
            *[job.parent_job_ids for job in jobs if job.parent_job_ids]
        )
    )
    if not parent_ids:
        return {}
    found = stores.kv.get_many_for_update([job_key(namespace, parent) for parent in parent_ids])
    parents: dict[str, JobRecord] = {}
    for parent_id in parent_ids:
        raw = found.get(job_key(namespace, parent_id))
        if raw is None:
            raise ParentNotFound(
                f"parent job {parent_id!r} does not exist in namespace {namespace!r} "
                "(or its record has expired)"
            )
        parents[parent_id] = decode_record(raw)
    return parents
