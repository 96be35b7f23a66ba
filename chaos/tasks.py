"""The tasks the fault suite enqueues; real ``later_worker`` processes run them.

Every execution writes JSON lines to a ledger file (``O_APPEND``, one
``write`` per line, fsynced before the task goes on), so the controller sees
exactly which process ran which job, when, and how often, even for a process
SIGKILLed a moment later.

Ledger line: ``{"job", "nonce", "event", "attempt", "pid", "at"}`` where
``nonce`` is a fresh uuid4 per execution and ``event`` is ``start``, ``done``
or ``exit`` (the process is about to die by ``os._exit``).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from later_django.compat.tasks import TaskContext, task


def append_line(path: str, entry: dict[str, Any]) -> None:
    """Appends ``entry`` plus ``pid`` and ``at`` (epoch seconds) as one line, durably."""
    line = json.dumps({**entry, "pid": os.getpid(), "at": time.time()}) + "\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line.encode())
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _event(context: TaskContext, path: str, nonce: str, event: str) -> None:
    job = context.task_result.id
    append_line(path, {"job": job, "nonce": nonce, "event": event, "attempt": context.attempt})


@task(takes_context=True)
def ledger(context: TaskContext, path: str, seconds: float = 0.0) -> int:
    """The load: ``start``, sleep ``seconds``, ``done``; returns the attempt."""
    nonce = uuid.uuid4().hex
    _event(context, path, nonce, "start")
    time.sleep(seconds)
    _event(context, path, nonce, "done")
    return context.attempt


@task(takes_context=True)
def slow_first_attempt(context: TaskContext, path: str, seconds: float) -> int:
    """Like :func:`ledger`, but only the first attempt sleeps (``seconds``)."""
    nonce = uuid.uuid4().hex
    _event(context, path, nonce, "start")
    time.sleep(seconds if context.attempt == 1 else 0.0)
    _event(context, path, nonce, "done")
    return context.attempt


@task(takes_context=True, retry={"max_retries": 1, "backoff": "immediate"})
def exit_abruptly(context: TaskContext, path: str) -> None:
    """Kills the process running it (``os._exit(1)``) after an ``exit`` line."""
    _event(context, path, uuid.uuid4().hex, "exit")
    os._exit(1)


@task(retry={"max_retries": 0})
def return_non_json(path: str) -> Any:
    """Returns a value that is not JSON: the worker must fail the job, not crash."""
    return {object()}


@task
def batch_callback(outcome: Any, path: str, rule: str) -> None:
    """A batch callback (``later_django.batches``): one line with the outcome's counts."""
    append_line(
        path,
        {"event": "batch", "rule": rule, "members": outcome.members,
         "succeeded": outcome.succeeded, "failed": outcome.failed},
    )  # fmt: skip
