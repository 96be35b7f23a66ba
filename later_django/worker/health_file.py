"""``later_worker --health-file PATH``: a liveness file that needs no database.

A worker process touches its file at every turn of its loop, at most once per
:data:`TOUCH_SECONDS`, and while it backs off from a database error (at least every
6 s then), so a liveness probe (``find PATH -mmin -1``, or the file's age) stays green
through a database outage and goes red when the loop hangs. It is a liveness signal,
not readiness: ``later_status --check`` reads the database for that.

Under ``--processes N`` each child touches ``PATH.<its pid>`` and the supervisor
touches ``PATH`` itself, at least every second, only while every child's file is
fresher than :data:`CHILD_STALE_SECONDS` (a child just started counts as fresh for
that long): one hung child turns the probe red. A write error is logged (once a
minute at most) and never stops the worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

logger = logging.getLogger("later_django.worker")

#: How often a file is touched at most.
TOUCH_SECONDS = 1.0
#: A child's file older than this makes its supervisor stop touching the main file.
CHILD_STALE_SECONDS = 10.0
_WARN_EVERY_SECONDS = 60.0


def child_path(path: str, pid: int) -> str:
    """The file a supervised child of ``path`` touches."""
    return f"{path}.{pid}"


def check_writable(path: str) -> None:
    """``ValueError`` naming ``path`` when its directory does not exist or the file
    cannot be written (at start, so a typo fails loudly)."""
    try:
        touch_file(path)
    except OSError as error:
        raise ValueError(f"--health-file {path!r} cannot be written: {error}") from None


def touch_file(path: str) -> None:
    """Creates ``path`` or sets its modification time to now."""
    with open(path, "a", encoding="utf-8"):
        pass
    os.utime(path)


class HealthFile:
    """Touches one file, at most every ``every`` seconds (any thread)."""

    def __init__(self, path: str, every: float = TOUCH_SECONDS) -> None:
        self.path = path
        self.every = every
        self._touched_at = float("-inf")
        self._warned_at = float("-inf")

    def touch(self) -> None:
        now = time.monotonic()
        if now - self._touched_at < self.every:
            return
        self._touched_at = now
        try:
            touch_file(self.path)
        except OSError as error:
            if now - self._warned_at >= _WARN_EVERY_SECONDS:
                self._warned_at = now
                logger.warning("could not touch the health file %s: %s", self.path, error)


class SupervisorHealth:
    """The supervisor's side: touches ``path`` while every child's file is fresh."""

    def __init__(self, path: str) -> None:
        self.file = HealthFile(path, every=0.0)
        self.path = path
        self._started: dict[int, float] = {}

    def child_started(self, pid: int) -> None:
        self._started[pid] = time.time()

    def child_gone(self, pid: int) -> None:
        self._started.pop(pid, None)
        with contextlib.suppress(OSError):
            Path(child_path(self.path, pid)).unlink(missing_ok=True)

    def check(self, pids: list[int]) -> None:
        """Touches the main file when every one of ``pids`` touched its own recently."""
        now = time.time()
        for pid in pids:
            try:
                seen = os.stat(child_path(self.path, pid)).st_mtime
            except OSError:
                seen = self._started.get(pid, now)
            if now - seen > CHILD_STALE_SECONDS:
                return
        self.file.touch()
