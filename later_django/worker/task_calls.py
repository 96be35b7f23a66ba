"""Task code and Django's task signals: the only place the worker calls into a task.

:func:`run_job` runs on a job thread: ``task_started``, the call, and the
outcome it returns (an exception is the job's failure, never the worker's).
:func:`announce_finished` runs on the main thread once the outcome is written:
``task_finished`` for a job that reached a final stage, a WARNING line for a
failed attempt that will be retried. Nothing here touches the database beyond
the task's own work, and a successful job costs no log formatting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import close_old_connections

from later_django.compat.tasks import Task, TaskContext, TaskResult, task_finished, task_started
from later_django.conf import later_settings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.log_context import job_context, job_fields
from later_django.core.payload import json_compatible
from later_django.core.records import JobError, JobRecord, pack
from later_django.engine.cancellation import CancelFlag, running_with
from later_django.engine.execution.values import Outcome, StartedJob
from later_django.engine.moves import error_from_exception
from later_django.engine.parent_results import ParentResults, parent_ids_of
from later_django.engine.results import task_result
from later_django.engine.tracing import execution_span
from later_django.exceptions import ParentResultMissing, ResultTooLarge

logger = logging.getLogger("later_django.worker")


@dataclass(frozen=True, kw_only=True)
class LaterTaskContext(TaskContext):
    """The ``context`` a ``takes_context`` task of later_django gets: django.tasks'
    ``TaskContext`` plus ``cancelled``, a flag set once the job's cancel is requested
    (``if context.cancelled: ...``, ``context.cancelled.wait(5)``), and
    ``parent_results``, a read-only mapping parent job id -> return value of a child's
    parents (``continue_with``: its one parent; ``after``: all, in the order given;
    empty for a job without parents), read on first use
    (:class:`~later_django.engine.parent_results.ParentResults`)."""

    cancelled: CancelFlag
    parent_results: Mapping[str, Any] = field(default_factory=lambda: ParentResults(None, "", ()))


def run_job(job: StartedJob, *, manage_connections: bool = True) -> Outcome:
    """Calls the task of ``job`` and returns its outcome; never raises. The thread's
    database connections are closed before and after (a job thread is reused),
    unless ``manage_connections`` is False: :mod:`later_django.testing` calls the
    task on the test's own connection, inside the test's transaction."""
    if manage_connections:
        close_old_connections()
    started = time.perf_counter()
    try:
        # The task's own log lines, and Django's, carry the job's fields.
        with job_context(job_fields(job.record)):
            outcome = _outcome(job)
        outcome.seconds = time.perf_counter() - started
        return outcome
    finally:
        if manage_connections:
            close_old_connections()


def _outcome(job: StartedJob) -> Outcome:
    """A raising task gives a retryable failure; a return value JSON cannot hold a
    failure that is not retried (the task ran to its end: running it again would
    repeat its side effects and return the same kind of value). (A job whose cancel
    was requested meanwhile is written cancelled, whatever the task did: the finish
    reads its flag.)"""
    try:
        with running_with(job.cancel), execution_span(job.record):
            value = _call(job)
    except BaseException as error:  # the job's failure, never the worker's
        # A parent's record gone will not come back: retrying cannot help.
        return _failure(job, error, retryable=not isinstance(error, ParentResultMissing))
    try:
        return_value = json_compatible(value, "the return value")
        if return_value is not None:
            _check_size(return_value)
    except BaseException as error:
        return _failure(job, error, retryable=False)
    return Outcome(job, return_value=return_value)


def _check_size(return_value: Any) -> None:
    """``ResultTooLarge`` naming the size, the limit and the setting when the encoded
    ``return_value`` (MessagePack, as the record holds it) is over
    ``LATER["RESULT_MAX_BYTES"]``."""
    limit = later_settings().result_max_bytes
    size = len(pack(return_value))
    if size > limit:
        raise ResultTooLarge(
            f"the return value is {size:,} bytes encoded, over the limit of {limit:,} "
            f"bytes (LATER['RESULT_MAX_BYTES'])"
        )


def _call(job: StartedJob) -> Any:
    """``task_started``, then the task itself, with its context when it takes one."""
    record = job.record
    result = task_result(record, job.task)
    task_started.send(sender=type(job.task.get_backend()), task_result=result)
    if job.task.takes_context:
        kv = None if job.stores is None else job.stores.kv
        parents = ParentResults(kv, record.namespace, parent_ids_of(record))
        context = LaterTaskContext(task_result=result, cancelled=job.cancel, parent_results=parents)
        return job.task.call(context, *record.args, **record.kwargs)
    return job.task.call(*record.args, **record.kwargs)


def _failure(job: StartedJob, error: BaseException, *, retryable: bool) -> Outcome:
    recorded = error_from_exception(error, now_ms(), job.record.attempts)
    return Outcome(job, error=recorded, exception=error, retryable=retryable)


def announce_finished(outcome: Outcome, record: JobRecord) -> None:
    """For the written ``record``: ``task_finished`` when it reached a final stage
    (sent inside a handler of the task's exception when it failed, so receivers
    such as Django's log line find it in ``sys.exc_info()``), a WARNING line when
    the attempt failed and will be retried. A failing receiver is logged, never
    raised: the outcome is already written."""
    if record.stage not in stages.FINISHED:
        if outcome.error is not None:
            _log_retry(outcome.error, outcome, record)
        return
    task = outcome.started.task
    fields = job_fields(record, outcome.seconds)
    try:
        with job_context(fields):
            result = task_result(record, task)
            if outcome.exception is None:
                task_finished.send(sender=type(task.get_backend()), task_result=result)
            else:
                _send_finished_handling(outcome.exception, task, result)
    except Exception:
        logger.exception("a task_finished receiver failed for job %s", record.job_id, extra=fields)


def _send_finished_handling(exception: BaseException, task: Task, result: TaskResult) -> None:
    """``task_finished`` sent while ``exception`` is being handled, with the
    traceback the task left (not one more frame for this re-raise)."""
    traceback = exception.__traceback__
    try:
        raise exception
    except BaseException:
        # sys.exc_info() reads the traceback from the exception (Python >= 3.11).
        exception.__traceback__ = traceback
        task_finished.send(sender=type(task.get_backend()), task_result=result)


def _log_retry(error: JobError, outcome: Outcome, record: JobRecord) -> None:
    """``attempt 2 of 5 failed with ValueError('x'); next run at <ISO time>`` at
    WARNING for the written ``record`` of a failed attempt that will be retried,
    with the task's traceback (the only time it is logged: a final failure's is
    logged by Django's ``task_finished`` receiver, at ERROR)."""
    exception = outcome.exception
    retry = record.retry or {}
    attempts = int(retry.get("max_retries", 0)) + 1
    # An immediate retry is enqueued again at once: it is ready from now.
    next_ms = record.run_after_ms if record.stage == stages.REQUEUED else record.ready_at_ms
    failure = error.exception_class_path if exception is None else repr(exception)
    logger.warning(
        "job %s (task %s, queue %s): attempt %d of %d failed with %s; next run at %s",
        record.job_id,
        record.task_path,
        record.queue_name,
        record.attempts,
        attempts,
        failure,
        _iso(next_ms),
        exc_info=None if exception is None else exception,
        extra=job_fields(record, outcome.seconds),
    )


def _iso(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "now"
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
