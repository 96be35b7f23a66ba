"""Processes the fault suite starts: spawning, signalling, CPU, and guaranteed cleanup.

Every process is started in a session of its own (``start_new_session``), so it
and everything it forks (a supervisor's children keep the session even in
their own process group) can be found in ``/proc`` and killed. Every spawned
process is registered in :data:`REGISTRY`; :func:`REGISTRY.kill_all` (called by
the cells' ``finally`` and by ``atexit``) SIGKILLs whatever is left.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
_TICKS = os.sysconf("SC_CLK_TCK")
_CHILD_ENVIRONMENT = {"PYTHONPATH": str(REPOSITORY), "PYTHONUNBUFFERED": "1"}
#: A child runs from the repository, in a session of its own, output to its log.
_SPAWN_OPTIONS = {
    "cwd": REPOSITORY,
    "stdin": subprocess.DEVNULL,
    "stderr": subprocess.STDOUT,
    "start_new_session": True,
}


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _live_processes() -> Iterator[tuple[int, list[str]]]:
    """``(pid, stat fields)`` of every process that is not a zombie."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[0] != "Z":
                yield int(entry.name), fields


def session_members(session_id: int) -> list[int]:
    """Live pids of session ``session_id`` (fields: state, ppid, pgrp, session, ...)."""
    return [pid for pid, fields in _live_processes() if int(fields[3]) == session_id]


def children_of(parent: int) -> list[int]:
    """Live direct children of ``parent``."""
    return [pid for pid, fields in _live_processes() if int(fields[1]) == parent]


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` in seconds (``None`` once it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    # After the name: state(0) ppid pgrp session tty tpgid flags minflt cminflt majflt
    # cmajflt utime(11) stime(12).
    return (int(fields[11]) + int(fields[12])) / _TICKS


@dataclass
class Proc:
    """One spawned process; its stdout and stderr go to ``log_path``."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    started_at: float = field(default_factory=time.time)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signum)

    def wait(self, timeout: float) -> int | None:
        """The exit status, or ``None`` if still running after ``timeout`` seconds."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def members(self) -> list[int]:
        """This process (the session leader) and every live process of its session."""
        return sorted(session_members(self.pid))

    def kill(self) -> None:
        """SIGKILL to the process and every process of its session; reaps it."""
        for pid in {self.pid, *session_members(self.pid)}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.wait(10)


class Registry:
    """Every process spawned by this controller, for cleanup."""

    def __init__(self) -> None:
        self.procs: list[Proc] = []

    def spawn(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> Proc:
        """Starts ``python argv...`` from the repository in a new session."""
        environment = {**os.environ, **_CHILD_ENVIRONMENT, **env}
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(
                [sys.executable, *argv], env=environment, stdout=log, **_SPAWN_OPTIONS
            )
        proc = Proc(name, popen, log_path)
        self.procs.append(proc)
        return proc

    def kill_all(self) -> None:
        """SIGKILLs every registered process (and its session) still running."""
        for proc in self.procs:
            if proc.alive() or session_members(proc.pid):
                proc.kill()
        self.procs.clear()


REGISTRY = Registry()
atexit.register(REGISTRY.kill_all)
