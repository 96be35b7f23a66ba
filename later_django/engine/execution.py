"""Starting and finishing batches of claimed jobs: the worker's writes.

A worker claims up to a batch of delivery messages, then:

* :func:`start_batch` reads the batch's records (one statement) and, in one
  transaction, writes them ``running`` with their index rows and execution
  leases (one statement per table), failing at once the jobs whose record
  cannot be decoded or whose task is not registered, and retrying (as a failed
  attempt) jobs left ``running`` by a worker whose lease lapsed;
* :func:`finish_batch` writes the outcomes of finished jobs in one transaction:
  acknowledgements, records, continuations of finished parents, index rows,
  released leases, and the delivery of retries and continuations.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.tasks import Task

from later_django.clock import now_ms
from later_django.conf import LaterSettings
from later_django.engine import moves, stages
from later_django.engine.records import (
    JobError,
    JobRecord,
    children_key,
    decode_record,
    job_key,
    read_records,
)
from later_django.engine.registry import UnregisteredTaskError, resolve_task
from later_django.engine.retry import RetryPolicy
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import RecordDecodeError
from later_django.storage.commands import ExecuteJob, decode_command
from later_django.storage.django import DjangoStorage
from later_django.storage.types import ClaimedMessage, RangeClear

logger = logging.getLogger("later_django.engine")


@dataclass
class StartedJob:
    """A job written ``running`` by this worker, ready to be called."""

    record: JobRecord
    task: Task
    sequence: int


@dataclass
class Outcome:
    """What running a job gave: a JSON-compatible return value, or an error."""

    started: StartedJob
    return_value: Any = None
    error: JobError | None = None


def task_retry_policy(task: Task | None) -> RetryPolicy | None:
    """The task's own retry policy (``@task(retry={...})`` on a ``LaterTask``)."""
    raw = getattr(task, "retry", None)
    if raw is None:
        return None
    return RetryPolicy.from_mapping(raw, f"the retry option of task {task.module_path}")


def start_batch(
    messages: Sequence[ClaimedMessage],
    *,
    using: str,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
) -> list[StartedJob]:
    """Writes the claimed jobs ``running`` (one transaction) and returns those to run.

    Messages that are not jobs, or whose job is gone, finished or not runnable
    now are acknowledged (or handed back, when another worker's execution lease
    is still current) in the same transaction.
    """
    now = now_ms()
    writes = JobWrites(namespace, ack_owner=worker_id, lease_owner=worker_id)
    writes.lease_started_at_ms = now
    commands: list[tuple[ClaimedMessage, ExecuteJob]] = []
    for message in messages:
        try:
            command = decode_command(message.payload)
        except RecordDecodeError as error:
            logger.error("dropping undecodable queue message %s: %s", message.sequence, error)
            writes.acks.append(message.sequence)
            continue
        if not isinstance(command, ExecuteJob):
            logger.warning("dropping queue message %s: not a job (%r)", message.sequence, command)
            writes.acks.append(message.sequence)
            continue
        commands.append((message, command))
    storage = DjangoStorage(using)
    raws = storage.get_many([job_key(namespace, command.job_id) for _, command in commands])
    records: dict[str, JobRecord] = {}
    started: list[StartedJob] = []
    for message, command in commands:
        raw = raws.get(job_key(namespace, command.job_id))
        if raw is None:
            logger.warning(
                "job %s has no record (deleted or expired); dropping its message", command.job_id
            )
            writes.acks.append(message.sequence)
            continue
        try:
            records[command.job_id] = decode_record(raw)
        except RecordDecodeError as error:
            logger.error("job %s: %s; marking it failed", command.job_id, error)
            moves.replace_undecodable(
                writes,
                namespace,
                command.job_id,
                command.payload_type,
                raw,
                str(error),
                now,
                settings,
            )
            writes.acks.append(message.sequence)
    running_ids = [job_id for job_id, record in records.items() if record.stage == stages.RUNNING]
    leases = storage.lease_get_many(namespace, running_ids) if running_ids else {}
    lease_until = now + lease_ms
    for message, command in commands:
        record = records.get(command.job_id)
        if record is None:
            continue
        if record.stage == stages.RUNNING:
            lease = leases.get(record.job_id)
            if lease is not None and lease.owner != worker_id and lease.lease_until_ms > now:
                writes.nacks.append((message.sequence, lease.lease_until_ms - now))
                continue
            lost = JobError(
                exception_class_path="later_django.exceptions.WorkerLost",
                traceback=(
                    f"worker {lease.owner if lease else 'unknown'} stopped renewing the "
                    f"execution lease of attempt {record.attempts}"
                ),
                at_ms=now,
                attempt=record.attempts,
            )
            moves.fail_attempt(writes, record, now, lost, settings, _policy_or_none(record))
            writes.acks.append(message.sequence)
            continue
        if record.stage != stages.ENQUEUED:
            writes.acks.append(message.sequence)
            continue
        try:
            task = resolve_task(record.task_path)
        except UnregisteredTaskError as error:
            logger.error("job %s: %s; marking it failed", record.job_id, error)
            moves.start(writes, record, now, worker_id, lease_until)
            moves.fail_attempt(
                writes,
                record,
                now,
                JobError(
                    "later_django.engine.registry.UnregisteredTaskError",
                    str(error),
                    now,
                    record.attempts,
                ),
                settings,
                retryable=False,
            )
            writes.leases_acquired.pop()
            writes.acks.append(message.sequence)
            continue
        moves.start(writes, record, now, worker_id, lease_until)
        started.append(StartedJob(record, task, message.sequence))
    if any(record.stage in stages.FINISHED for record, _ in writes.records.values()):
        writes.after_records = lambda pending, written: release_children(
            pending, written, using, settings
        )
    commit(writes, using)
    return started


def _policy_or_none(record: JobRecord) -> RetryPolicy | None:
    try:
        return task_retry_policy(resolve_task(record.task_path))
    except UnregisteredTaskError:
        return None


def finish_batch(
    outcomes: Sequence[Outcome],
    *,
    using: str,
    namespace: str,
    worker_id: str,
    settings: LaterSettings,
) -> list[JobRecord]:
    """Writes the outcomes in one transaction: success, a retry, or failure; the
    continuations of finished parents; leases released; messages acknowledged.
    Returns the records as written, in the order of ``outcomes``."""
    if not outcomes:
        return []
    finished: list[JobRecord] = []
    now = now_ms()
    writes = JobWrites(namespace, ack_owner=worker_id, lease_owner=worker_id)
    for outcome in outcomes:
        # A copy: when the write fails, the worker retries with the records unmoved.
        record = outcome.started.record.clone()
        finished.append(record)
        writes.acks.append(outcome.started.sequence)
        writes.leases_released.append(record.job_id)
        if outcome.error is None:
            moves.succeed(writes, record, now, outcome.return_value, settings)
        else:
            moves.fail_attempt(
                writes,
                record,
                now,
                outcome.error,
                settings,
                task_retry_policy(outcome.started.task),
            )
    writes.after_records = lambda pending, written: release_children(
        pending, written, using, settings
    )
    commit(writes, using)
    return finished


def release_children(
    writes: JobWrites, written: list[JobRecord], using: str, settings: LaterSettings
) -> None:
    """Moves the continuations of every finished job in ``written``, adding to ``writes``.

    Runs inside the finishing transaction after the parents' records were
    written, so a ``continue_with`` racing with the finish either committed
    its child first (and the child is seen here) or waits for this commit and
    then sees a finished parent. A child of a failed parent that runs only on
    success fails too, and so, in turn, do its own such children.
    """
    now = now_ms()
    namespace = writes.namespace
    storage = DjangoStorage(using)
    parents = [record for record in written if record.stage in stages.FINISHED]
    seen: set[str] = set()
    while parents:
        parents = [parent for parent in parents if parent.job_id not in seen]
        seen.update(parent.job_id for parent in parents)
        ranges = storage.range_members_many(
            [children_key(namespace, parent.job_id) for parent in parents]
        )
        if not ranges:
            return
        parent_of_range = {children_key(namespace, parent.job_id): parent for parent in parents}
        parent_of_child = {
            member.decode(): parent_of_range[key]
            for key, members in ranges.items()
            for member in members
        }
        children = read_records(storage, namespace, sorted(parent_of_child))
        writes.other_operations += [RangeClear(key) for key in sorted(ranges)]
        newly_finished: list[JobRecord] = []
        for child_id, child in sorted(children.items()):
            if child.stage != stages.WAITING:
                continue
            parent = parent_of_child[child_id]
            if parent.stage == stages.FAILED and child.run_on == "success":
                moves.fail_waiting(writes, child, now, f"parent {parent.job_id} failed", settings)
                newly_finished.append(child)
            else:
                moves.make_ready(writes, child, now)
        parents = newly_finished
