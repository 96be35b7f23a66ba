"""Stage moves of one job, expressed as changes to a :class:`JobWrites`.

Each function moves the record (through :func:`~later_django.core.stages.move`),
then adds what the move implies: the record write with its expiry, the index
row (or its removal: a queued job that is not on a partition has no index
row, the delivery queue answers for it), the schedule entry, the delivery
message, the lease, and the metric samples.
"""

from __future__ import annotations

import traceback as traceback_module
from collections.abc import Sequence
from typing import Any

from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.keys import due_key, undecodable_key
from later_django.core.records import JobError, JobRecord
from later_django.core.retry import RetryPolicy, recorded_lineage
from later_django.engine.writes import JobWrites
from later_django.exceptions import (
    JobCancelled,
    ParentFailed,
    StageMoveError,
    UnregisteredTaskError,
    WorkerLost,
    class_path,
)
from later_django.storage.partitions import PartitionEntry
from later_django.storage.types import Delete, JobIndexRow, Set

REGULAR = "regular"
#: The worker of an attempt whose start was never written (its claimer is not known).
UNKNOWN_WORKER = "unknown"
SEQUENTIAL = "sequential"


def index_row(
    record: JobRecord,
    *,
    expire_ms: int | None = None,
    wait_ms: int | None = None,
) -> JobIndexRow:
    return JobIndexRow(
        job_id=record.job_id,
        payload_type=record.task_path,
        stage=record.stage,
        stage_date_ms=record.stage_at_ms,
        revision=record.revision,
        created_at_ms=record.created_at_ms,
        wait_ms=wait_ms,
        wait_mode=None if wait_ms is None else (SEQUENTIAL if record.topic else REGULAR),
        topic=record.topic,
        partition_id=record.partition_id,
        sequence=record.sequence,
        parent_job_id=record.parent_job_id,
        date_expire_ms=expire_ms,
        queue_name=record.queue_name,
        error_class=record.errors[-1].exception_class_path if record.errors else None,
    )


def _index(writes: JobWrites, record: JobRecord, **extra: Any) -> None:
    writes.index(index_row(record, **extra))


# --- entering the system ---


def _partition(record: JobRecord) -> tuple[str, int]:
    assert record.topic is not None and record.partition_id is not None
    return (record.topic, record.partition_id)


def _place_partitioned(writes: JobWrites, record: JobRecord, now: int) -> None:
    """A new job on a partition: never published (the partition's head is claimed
    instead); it always has an index row, and its partition row carries the time
    it may run (the head when the partition had none)."""
    if record.stage == stages.ENQUEUED:
        record.ready_at_ms = now
        record.enqueued_at_ms = now
        earliest = now
    elif record.stage == stages.DELAYED:
        earliest = record.run_after_ms or now
    elif record.stage == stages.WAITING:
        earliest = now
    else:
        raise StageMoveError(f"a new job cannot start in stage {record.stage!r}")
    if record.sequence is None:
        raise ValueError(f"partitioned job {record.job_id} has no sequence")
    writes.save(record)
    _index(writes, record)
    topic, partition_id = _partition(record)
    writes.partitions.enter(
        PartitionEntry(topic, partition_id, record.sequence, record.job_id, earliest, record.stage)
    )


def place_ready(writes: JobWrites, records: Sequence[JobRecord], now: int) -> None:
    """New records that are ready at once (stage ``enqueued``, on no topic): each
    saved, published to its queue and priority (in the order of ``records``) and
    counted. :func:`place_new` of such a record, for a whole batch in one pass
    (``enqueue_many`` places thousands)."""
    for record in records:
        record.ready_at_ms = record.enqueued_at_ms = now
        writes.save(record)
    writes.publish_jobs(records)
    writes.count_transitions(records)


def place_new(writes: JobWrites, record: JobRecord, now: int) -> None:
    """A new record in its first stage (``enqueued``, ``delayed`` or ``waiting``)."""
    if record.topic is None and record.stage == stages.ENQUEUED:
        place_ready(writes, [record], now)
        return
    if record.topic is not None:
        _place_partitioned(writes, record, now)
    elif record.stage == stages.DELAYED:
        writes.save(record)
        _index(writes, record)
        writes.add(Set(due_key(record.namespace, record.run_after_ms or now, record.job_id), b""))
    elif record.stage == stages.WAITING:
        writes.save(record)
        _index(writes, record)
    else:
        raise StageMoveError(f"a new job cannot start in stage {record.stage!r}")
    writes.count_transition(record)


def make_ready(writes: JobWrites, record: JobRecord, now: int) -> None:
    """delayed / waiting / requeued -> enqueued: publish, drop the index row.
    A partitioned job keeps its index row and is not published: its partition's
    head is recomputed instead."""
    if record.topic is not None:
        stages.move(record, stages.ENQUEUED, now)
        record.ready_at_ms = now
        if record.enqueued_at_ms is None:
            record.enqueued_at_ms = now
        writes.save(record)
        _index(writes, record)
        writes.partitions.touch(_partition(record))
        writes.count_transition(record)
        return
    had_index_row = record.stage in (stages.DELAYED, stages.WAITING, stages.REQUEUED)
    stages.move(record, stages.ENQUEUED, now)
    record.ready_at_ms = now
    if record.enqueued_at_ms is None:
        record.enqueued_at_ms = now
    writes.save(record)
    writes.publish_job(record)
    if had_index_row:
        writes.unindex(record.job_id)
    writes.count_transition(record)


def retry_failed(writes: JobWrites, record: JobRecord, now: int) -> None:
    """failed -> enqueued, an operator's move: the job runs once more.

    The record is live again (no expiry) and published; its index row goes (the
    delivery queue answers for a queued job). The errors of earlier attempts are
    kept, so a retry policy whose retries are used up fails the job again at its
    next error. Raises ``StageMoveError`` for a job that is not failed or is on a
    topic partition (whose order the partition keeps)."""
    if record.stage != stages.FAILED:
        raise StageMoveError(
            f"job {record.job_id} is {record.stage!r}; only a failed job can be retried"
        )
    if record.topic is not None:
        raise StageMoveError(
            f"job {record.job_id} is on partition {record.partition_id} of topic "
            f"{record.topic!r}; an operator retry would skip the partition's order"
        )
    stages.move(record, stages.ENQUEUED, now, operator=True)
    record.ready_at_ms = now
    record.finished_at_ms = None
    record.reason = None
    writes.save(record)
    writes.publish_job(record)
    writes.unindex(record.job_id)
    writes.count_transition(record)


def rerun(writes: JobWrites, record: JobRecord, now: int, stage: str) -> None:
    """A finished job -> ``enqueued`` or ``waiting``, an operator's move (a workflow's
    retry: a failed or cancelled job, or one downstream of such): the record is live
    again (no expiry), published when enqueued, indexed when waiting; its caller
    registers a waiting job with its parents. Errors of attempts that ran are kept
    (its retry policy counts them, as for :func:`retry_failed`); those of no attempt
    (failed by a parent, cancelled before it ran) are dropped: they used no retry."""
    stages.move(record, stage, now, operator=True)
    record.finished_at_ms = None
    record.reason = None
    record.errors = [error for error in record.errors if error.attempt > 0]
    writes.save(record)
    if stage == stages.ENQUEUED:
        record.ready_at_ms = now
        writes.publish_job(record)
        writes.unindex(record.job_id)
    else:
        _index(writes, record)
    writes.count_transition(record)


def unschedule(writes: JobWrites, record: JobRecord, due_at_ms: int) -> None:
    writes.add(Delete(due_key(record.namespace, due_at_ms, record.job_id)))


# --- running ---


def _begin_attempt(writes: JobWrites, record: JobRecord, now: int, worker_id: str) -> None:
    """enqueued -> running on ``worker_id``: the attempt is counted and its wait sampled."""
    stages.move(record, stages.RUNNING, now)
    record.worker_ids.append(worker_id)
    if record.started_at_ms is None:
        record.started_at_ms = now
    record.last_attempted_at_ms = now
    wait_ms = max(0, now - (record.ready_at_ms or now))
    writes.save(record)
    _index(writes, record, wait_ms=wait_ms)
    writes.count_wait(SEQUENTIAL if record.topic else REGULAR, wait_ms, now)
    if record.topic is not None:
        writes.partitions.touch(_partition(record))
    writes.count_transition(record)


def start(
    writes: JobWrites, record: JobRecord, now: int, worker_id: str, lease_until_ms: int
) -> None:
    """enqueued -> running under ``worker_id``'s execution lease."""
    _begin_attempt(writes, record, now, worker_id)
    writes.acquire_lease(record.job_id, lease_until_ms, record.attempts)


def refuse_unregistered(
    writes: JobWrites,
    record: JobRecord,
    now: int,
    worker_id: str,
    error: UnregisteredTaskError,
    settings: LaterSettings,
) -> None:
    """enqueued -> running -> failed at once, with no execution lease and no retry:
    the record's task path is not a registered task (``error`` says why), and
    waiting will not register it. The attempt counts, like one that ran."""
    _begin_attempt(writes, record, now, worker_id)
    failure = JobError(class_path(UnregisteredTaskError), str(error), now, record.attempts)
    fail_attempt(writes, record, now, failure, settings, retryable=False)


def fail_unwritten_start(
    writes: JobWrites,
    record: JobRecord,
    now: int,
    why: str,
    settings: LaterSettings,
    task_policy: RetryPolicy | None = None,
) -> None:
    """enqueued -> running -> requeued or failed: the attempt of a worker lost between
    its claim of the job's message and the commit of the job's start (decision 112).
    The attempt counts, as its task may have begun; it fails as ``WorkerLost`` (``why``
    its text) under an unknown worker, and the retry policy decides what follows."""
    _begin_attempt(writes, record, now, UNKNOWN_WORKER)
    failure = JobError(class_path(WorkerLost), why, now, record.attempts)
    fail_attempt(writes, record, now, failure, settings, task_policy)


def _finish(
    writes: JobWrites, record: JobRecord, stage: str, now: int, settings: LaterSettings
) -> None:
    stages.move(record, stage, now)
    record.finished_at_ms = now
    ttl = settings.retention_seconds[stage]
    writes.save(record, ttl)
    _index(writes, record, expire_ms=now + ttl * 1000)
    if record.topic is not None and record.partition_id is not None:
        writes.partitions.leave(record.job_id, _partition(record))
    writes.count_transition(record)


def succeed(
    writes: JobWrites, record: JobRecord, now: int, return_value: Any, settings: LaterSettings
) -> None:
    """running -> success with the return value; the record expires by retention."""
    record.return_value = return_value
    _finish(writes, record, stages.SUCCESS, now, settings)


def error_from_exception(error: BaseException, now: int, attempt: int) -> JobError:
    kind = type(error)
    return JobError(
        exception_class_path=class_path(kind),
        traceback="".join(traceback_module.format_exception(error)),
        at_ms=now,
        attempt=attempt,
    )


def fail_attempt(
    writes: JobWrites,
    record: JobRecord,
    now: int,
    error: JobError,
    settings: LaterSettings,
    task_policy: RetryPolicy | None = None,
    *,
    retryable: bool = True,
    raised: Sequence[str] | None = None,
) -> None:
    """running -> requeued (a retry is due later, or at once) or -> failed.

    The policy is resolved at the first failure (the task's own, else the
    server default) and stored in the record; retries are counted from the
    errors kept, one per failed attempt. ``raised`` is the lineage
    (:func:`~later_django.core.retry.lineage`) of the exception the attempt raised;
    without it the error's recorded class path stands for it. When the policy's
    ``give_up_on``/``retry_on`` rule says to give up, the job fails at once and
    ``record.reason`` says so (an operator retry clears it).
    """
    record.errors.append(error)
    if record.retry is None:
        record.retry = (task_policy or settings.retry).to_dict()
    policy = RetryPolicy.from_mapping(record.retry, f"the retry policy of job {record.job_id}")
    retries_used = len(record.errors) - 1
    rule = None
    if retryable:
        rule = policy.give_up_rule(raised or recorded_lineage(error.exception_class_path))
    if rule is not None:
        record.reason = _gave_up(rule, error.attempt, policy.max_retries - retries_used)
    if rule is not None or not retryable or retries_used >= policy.max_retries:
        _finish(writes, record, stages.FAILED, now, settings)
        return
    delay_ms = int(policy.delay_seconds(retries_used + 1) * 1000)
    stages.move(record, stages.REQUEUED, now)
    writes.count_transition(record)
    if delay_ms <= 0:
        make_ready(writes, record, now)
        return
    record.run_after_ms = now + delay_ms
    writes.save(record)
    _index(writes, record)
    if record.topic is not None:
        writes.partitions.retry_at(record.job_id, _partition(record), now + delay_ms)
        return
    writes.add(Set(due_key(record.namespace, now + delay_ms, record.job_id), b""))


def _gave_up(rule: str, attempt: int, retries_left: int) -> str:
    """The reason of a job failed by its policy's exception rule, e.g. ``Gave up at
    once on attempt 1 (3 retries left): builtins.KeyError is in the retry policy's
    give_up_on``."""
    left = max(0, retries_left)
    unused = f"{left} retr{'y' if left == 1 else 'ies'} left" if left else "no retries left"
    return f"Gave up at once on attempt {attempt} ({unused}): {rule}"


def fail_waiting(
    writes: JobWrites, record: JobRecord, now: int, reason: str, settings: LaterSettings
) -> None:
    """waiting -> failed with ``reason`` (its parent failed)."""
    record.reason = reason
    record.errors.append(
        JobError(
            exception_class_path=class_path(ParentFailed),
            traceback=reason,
            at_ms=now,
            attempt=0,
        )
    )
    _finish(writes, record, stages.FAILED, now, settings)


def cancel(
    writes: JobWrites, record: JobRecord, now: int, reason: str, settings: LaterSettings
) -> None:
    """Any live stage -> cancelled with ``reason``, recorded as a ``JobCancelled``
    error of the current attempt (0 for a job that never ran). The caller removes
    what the stage held outside the record: the schedule entry of a delayed or
    requeued job (:func:`unschedule`), the delivery message of a queued one, the
    execution lease of a running one. A partitioned job leaves its partition."""
    record.reason = reason
    record.errors.append(
        JobError(
            exception_class_path=class_path(JobCancelled),
            traceback=reason,
            at_ms=now,
            attempt=record.attempts,
        )
    )
    _finish(writes, record, stages.CANCELLED, now, settings)


def replace_undecodable(
    writes: JobWrites,
    namespace: str,
    job_id: str,
    task_path: str,
    raw: bytes,
    reason: str,
    now: int,
    settings: LaterSettings,
) -> JobRecord:
    """A failed record standing in for one that cannot be decoded; the original
    bytes are kept beside it for as long as failed jobs are kept. It has no queue
    (``queue_name`` empty), which is how an operator's retry knows to refuse it."""
    record = JobRecord(
        job_id=job_id,
        namespace=namespace,
        task_path=task_path,
        args=[],
        kwargs={},
        queue_name="",
        priority=0,
        backend="default",
        stage=stages.FAILED,
        stage_at_ms=now,
        created_at_ms=now,
        reason=reason,
        finished_at_ms=now,
        errors=[
            JobError("later_django.exceptions.RecordDecodeError", reason, now, 0),
        ],
    )
    ttl = settings.retention_seconds[stages.FAILED]
    writes.save(record, ttl)
    writes.add(Set(undecodable_key(namespace, job_id), raw, ttl))
    _index(writes, record, expire_ms=now + ttl * 1000)
    writes.count_transition(record)
    return record
