"""Tasks the worker tests enqueue and real ``later_worker`` subprocesses run.

Each writes JSON lines to a file named by its first argument (flushed and
fsynced, so the test process sees them at once), which tells the test which
process ran what, when, and how many times.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from later_django.compat.tasks import TaskContext, task


def append_line(path: str, entry: dict[str, Any]) -> None:
    line = json.dumps({**entry, "pid": os.getpid(), "at": time.time()}) + "\n"
    with open(path, "a", encoding="utf-8") as file:
        file.write(line)
        file.flush()
        os.fsync(file.fileno())


def read_lines(path: str | Path) -> list[dict[str, Any]]:
    """The entries written so far (none when the file does not exist yet). A last line
    without its newline is being written by a worker right now: it is left out."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


@task
def record(path: str, label: Any) -> Any:
    """Writes one line with ``label`` and returns it."""
    append_line(path, {"label": label, "event": "run"})
    return label


@task(takes_context=True)
def record_parent_results(context: Any, path: str, label: str) -> list[list[Any]]:
    """Writes one line with ``label`` and its parents' results (``[[id, result], ...]``,
    in the order given) and returns them."""
    results = [[parent, value] for parent, value in context.parent_results.items()]
    append_line(path, {"label": label, "event": "run", "parent_results": results})
    return results


@task
def sleep_and_record(path: str, label: str, seconds: float) -> str:
    """Writes a ``start`` line, sleeps ``seconds``, writes an ``end`` line."""
    append_line(path, {"label": label, "event": "start"})
    time.sleep(seconds)
    append_line(path, {"label": label, "event": "end"})
    return label


@task(takes_context=True)
def sleep_on_first_attempt(context: TaskContext, path: str, label: str, seconds: float) -> int:
    """Like :func:`sleep_and_record`, but only the first attempt sleeps ``seconds``."""
    attempt = context.attempt
    append_line(path, {"label": label, "event": "start", "attempt": attempt})
    time.sleep(seconds if attempt == 1 else 0.05)
    append_line(path, {"label": label, "event": "end", "attempt": attempt})
    return attempt


@task
def spin_and_record(path: str, label: Any, seconds: float) -> Any:
    """Keeps a CPU busy in Python for ``seconds`` (holding the GIL most of the time),
    then writes one line with ``label`` and returns it."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass
    append_line(path, {"label": label, "event": "run"})
    return label


def plain_function(path: str, label: Any) -> None:
    """Not a ``Task``: a record naming it must be refused, never called."""
    append_line(path, {"label": label, "event": "plain function ran"})


@task(takes_context=True)
def wait_for_cancel(context: TaskContext, path: str, label: str, seconds: float) -> str:
    """Writes ``start``, then looks at ``context.cancelled`` every 20 ms for up to
    ``seconds``: once set, writes ``saw cancel`` and stops through ``check_cancelled``."""
    from later_django.api import check_cancelled

    append_line(path, {"label": label, "event": "start"})
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if context.cancelled:
            append_line(path, {"label": label, "event": "saw cancel"})
            check_cancelled()
        time.sleep(0.02)
    append_line(path, {"label": label, "event": "end"})
    return label


@task(timeout=1, retry={"max_retries": 0})
def sleep_past_timeout(path: str, label: str, seconds: float) -> str:
    """Like :func:`sleep_and_record`, with a timeout of one second and no retries."""
    append_line(path, {"label": label, "event": "start"})
    time.sleep(seconds)
    append_line(path, {"label": label, "event": "end"})
    return label


@task(takes_context=True, retry={"max_retries": 1, "backoff": "immediate"})
def exit_process_at_once(context: TaskContext, path: str, label: str) -> None:
    """A poison job: writes a ``run`` line, then ends its process at once (no clean-up,
    no outcome), at every attempt."""
    append_line(path, {"label": label, "event": "run", "attempt": context.attempt})
    os._exit(3)


@task
def fail_always(path: str, label: str) -> None:
    """Writes a ``run`` line and raises ``ValueError``, at every attempt."""
    append_line(path, {"label": label, "event": "run"})
    raise ValueError(f"{label} always fails")


@task(takes_context=True)
def fail_on_first_attempt(context: TaskContext, path: str, label: str) -> str:
    """Raises ``ValueError`` at its first attempt; returns ``label`` at the next."""
    append_line(path, {"label": label, "event": "run", "attempt": context.attempt})
    if context.attempt == 1:
        raise ValueError(f"{label} fails once")
    return label
