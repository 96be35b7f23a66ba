"""Module-level tasks for the engine tests.

Tasks that must tell the test what happened append a line to a file whose path
is passed as an argument (the worker runs them on its own threads).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from later_django.compat.tasks import task


class Boom(Exception):
    """The failure of the failing test tasks."""


def append_line(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{line}\n")


def read_lines(path: str | Path) -> list[str]:
    file = Path(path)
    return file.read_text(encoding="utf-8").splitlines() if file.exists() else []


@task
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name="emails")
def add_on_emails(a: int, b: int) -> int:
    return a + b


@task
def record(path: str, label: str) -> str:
    append_line(path, label)
    return label


@task(retry={"max_retries": 2, "backoff": "fixed", "initial": 0.2})
def fail_always(message: str) -> None:
    raise Boom(message)


@task(retry={"max_retries": 0})
def fail_once_without_retry(message: str) -> None:
    raise Boom(message)


@task(retry={"max_retries": 2, "backoff": "fixed", "initial": 0.2})
def fail_first_time(path: str) -> str:
    """Fails on its first run (leaving a mark in ``path``), succeeds on the next."""
    if not Path(path).exists():
        append_line(path, "failed")
        raise Boom("first attempt fails")
    append_line(path, "succeeded")
    return "second time lucky"


@task(retry={"max_retries": 0})
def fail_first_time_without_retry(path: str) -> str:
    """:func:`fail_first_time` with no retry: it fails, and succeeds when run again."""
    return fail_first_time.func(path)


@task(takes_context=True, retry={"max_retries": 1, "backoff": "immediate"})
def attempt_seen(context, path: str) -> int:
    """Records ``context.attempt``; fails on the first attempt, returns it on the second."""
    append_line(path, str(context.attempt))
    if context.attempt == 1:
        raise Boom("first attempt fails")
    return context.attempt


@task
async def async_double(value: int) -> int:
    return value * 2


@task
def wait_for_file(path: str, timeout: float) -> str:
    """Runs until ``path`` exists (at most ``timeout`` seconds): a job the test can
    observe while it is running."""
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(0.01)
    return "released"


@task
def fail_with_server_policy(message: str) -> None:
    """Fails; has no retry option of its own, so ``LATER["RETRY"]`` applies."""
    raise Boom(message)


@task
def return_a_set() -> set[int]:
    return {1, 2}


@task(takes_context=True)
def context_of_run(context) -> dict[str, object]:
    """The queue, priority and backend of the task its context names, as the worker ran it."""
    own = context.task_result.task
    return {"queue_name": own.queue_name, "priority": own.priority, "backend": own.backend}


@task(takes_context=True)
def record_then_wait(context, path: str, gate: str, timeout: float) -> int:
    """Appends its attempt number to ``path``, then runs until ``gate`` exists (at
    most ``timeout`` seconds) and a little longer: a job still running while the
    worker's main thread gets on with its turn."""
    append_line(path, str(context.attempt))
    deadline = time.monotonic() + timeout
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    return context.attempt


@task(unique={})
def unique_by_arguments(a: int, b: int) -> int:
    """Unique by its arguments while live."""
    return a + b


@task(unique={"key": lambda user_id, **_: f"user-{user_id}"})
def sync_user(user_id: int, note: str = "") -> int:
    """Unique per user id, whatever the note."""
    return user_id


@task(unique={"key": "the-report", "while": ["delayed"]})
def nightly_report() -> str:
    """Unique only while a run is delayed."""
    return "report"


@task(unique={"key": "short", "for_seconds": 60})
def unique_for_a_minute() -> str:
    return "minute"


@task(unique={"key": lambda value: value})
def keyed_by_its_argument(value: object) -> None:
    """Its key is its argument as given: a non-string is refused at enqueue."""


@task
def cancel_itself() -> None:
    """Raises ``JobCancelled`` with no cancel requested: the job is cancelled."""
    from later_django.api import JobCancelled

    raise JobCancelled("giving up")


@task
def log_a_line(message: str) -> str:
    """Logs ``message`` at INFO on ``tests.engine.tasks`` (the task's own log line)."""
    logging.getLogger("tests.engine.tasks").info(message)
    return message


@task
def record_outcome(outcome, path: str, label: str) -> int:
    """A batch callback: writes ``label`` and the outcome's counts as one JSON line."""
    counts = {
        "label": label,
        "members": outcome.members,
        "succeeded": outcome.succeeded,
        "failed": outcome.failed,
        "cancelled": outcome.cancelled,
        "failed_ids": outcome.failed_ids,
    }
    append_line(path, json.dumps(counts))
    return outcome.members


@task(takes_context=True, retry={"max_retries": 0})
def spawn_into_batch(context, path: str, count: int, depth: int = 0) -> int:
    """A batch member that adds ``count`` members (``later_django.batches.add``) which
    record their label; with ``depth`` > 0 each added one spawns in turn."""
    from later_django.batches import add

    for number in range(count):
        if depth:
            add(context, spawn_into_batch, path, 1, depth - 1)
        else:
            add(context, record, path, f"added-{number}")
    return count
