"""Tasks the partition tests enqueue (in-process workers and ``later_worker`` processes).

Each appends one JSON line to the file named by its first argument (flushed and
fsynced), naming the key, the job's number within its key, and the process.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from django.tasks import task


def append_line(path: str, entry: dict[str, Any]) -> None:
    line = json.dumps({**entry, "pid": os.getpid(), "at": time.time()}) + "\n"
    with open(path, "a", encoding="utf-8") as file:
        file.write(line)
        file.flush()
        os.fsync(file.fileno())


def read_lines(path: str | Path) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


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
