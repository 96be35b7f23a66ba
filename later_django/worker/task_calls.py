"""Task code and Django's task signals: the only place the worker calls into a task.

:func:`run_job` runs on a job thread: ``task_started``, the call, and the
outcome it returns (an exception is the job's failure, never the worker's).
:func:`announce_finished` runs on the main thread once the outcome is written:
``task_finished`` for a job that reached a final stage or was requeued.
"""

from __future__ import annotations

import logging

from django.db import close_old_connections

from later_django.compat.tasks import TaskContext, TaskResultStatus, task_finished, task_started
from later_django.core.clock import now_ms
from later_django.core.payload import json_compatible
from later_django.core.records import JobRecord
from later_django.engine.execution import Outcome, StartedJob
from later_django.engine.moves import error_from_exception
from later_django.engine.results import task_result

logger = logging.getLogger("later_django.worker")


def run_job(job: StartedJob) -> Outcome:
    """Calls the task of ``job`` and returns its outcome; never raises. The thread's
    database connections are closed before and after (a job thread is reused)."""
    close_old_connections()
    record = job.record
    try:
        result = task_result(record, job.task, record.backend)
        task_started.send(sender=type(job.task.get_backend()), task_result=result)
        if job.task.takes_context:
            value = job.task.call(TaskContext(task_result=result), *record.args, **record.kwargs)
        else:
            value = job.task.call(*record.args, **record.kwargs)
        return Outcome(job, return_value=json_compatible(value, "the return value"))
    except BaseException as error:  # the job's failure, never the worker's
        return Outcome(job, error=error_from_exception(error, now_ms(), record.attempts))
    finally:
        close_old_connections()


def announce_finished(outcome: Outcome, record: JobRecord) -> None:
    """Sends ``task_finished`` for the written ``record`` unless it is ready again;
    a failing receiver is logged, never raised."""
    try:
        result = task_result(record, outcome.started.task, record.backend)
        if result.status != TaskResultStatus.READY:
            task_finished.send(sender=type(outcome.started.task.get_backend()), task_result=result)
    except Exception:
        logger.exception("a task_finished receiver failed for job %s", record.job_id)
