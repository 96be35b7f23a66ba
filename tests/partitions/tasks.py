"""Tasks the partition tests enqueue (in-process workers and ``later_worker`` processes).

Each appends one JSON line to the file named by its first argument (flushed and
fsynced), naming the key, the job's number within its key, and the process.
"""

from __future__ import annotations

import time

from later_django.compat.tasks import task

# The worker tests' line log; re-exported so the partition tests read ``tasks.read_lines``.
from tests.worker.tasks import append_line, read_lines

__all__ = ["append_line", "read_lines"]


@task
def record_key(path: str, key: str, n: int) -> int:
    """Writes ``(key, n)`` and returns ``n``."""
    append_line(path, {"key": key, "n": n})
    return n


@task
def slow_record_key(path: str, key: str, n: int, seconds: float) -> int:
    """Writes a ``start`` line, sleeps, writes an ``end`` line."""
    append_line(path, {"key": key, "n": n, "event": "start"})
    time.sleep(seconds)
    append_line(path, {"key": key, "n": n, "event": "end"})
    return n


@task
def always_fails(path: str, key: str, n: int) -> None:
    append_line(path, {"key": key, "n": n, "event": "fail"})
    raise RuntimeError(f"job {key}/{n} fails on purpose")


@task
def noop() -> None:
    """Does nothing (the benchmark's job)."""
