"""``later_worker --processes N``: a supervisor that forks N worker processes.

Each child runs a :class:`~later_django.worker.runner.Worker` in its own
process group (a terminal's Ctrl-C reaches only the supervisor, which passes
one signal on). The first SIGTERM/SIGINT is forwarded to every child, which
stops gracefully; a second one is forwarded too, and children exit at once.

Children that exit on their own are reaped the moment they exit (SIGCHLD rings
the supervisor's bell; every exited child is collected at each wake-up) and
replaced at once; only a slot whose children keep crashing (non-zero exit
within STABLE_SECONDS of starting, twice or more in a row) waits before its
next start, 1 s doubling to 30 s. With ``--burst`` no child is replaced: one that
exits 0 has drained, one that fails (non-zero, or killed) is logged and makes the
supervisor's exit status 1 once the others are done. A child learns that its
supervisor died (SIGKILL of the supervisor or of its process group) from
``PR_SET_PDEATHSIG`` on Linux and from ``os.getppid()`` in its loop everywhere,
and then stops within a few seconds, handing back what it still runs. The
supervisor exits 0 when every child exited 0 after a stop (or, with ``--burst``,
once all are done; 1 if any failed). A child that exits with ``EXIT_NOT_TRANSIENT``
(an error that retrying cannot cure) is not replaced: the supervisor stops the others
and exits with that status.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from django.db import connections

from later_django.worker.bell import Bell
from later_django.worker.health_file import SupervisorHealth
from later_django.worker.process import EXIT_NOT_TRANSIENT, EXIT_REPLACE

logger = logging.getLogger("later_django.worker")

#: How often the supervisor looks at its children's health files (``--health-file``).
HEALTH_CHECK_SECONDS = 1.0
#: A child that ran at least this long before crashing is replaced at once.
STABLE_SECONDS = 5.0
FIRST_RESTART_PAUSE_SECONDS = 1.0
MAX_RESTART_PAUSE_SECONDS = 30.0
_PR_SET_PDEATHSIG = 1
#: Blocked while a child is forked: the supervisor's handler then always knows the
#: new child, and the child gets them only once its worker's handlers are in place.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """SIGTERM and SIGINT held pending (not lost) inside the block."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def die_with_parent(parent_pid: int) -> None:
    """In a forked child: SIGTERM when the parent dies (Linux ``PR_SET_PDEATHSIG``;
    elsewhere the worker loop's ``os.getppid()`` check is the only watch). Exits
    at once if the parent is already gone."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            # The process's own symbols include libc's prctl (no library search,
            # which would run a subprocess).
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def _fork_child(run_child: Callable[[int], int], bell: Bell) -> int:
    """Forks a child that runs ``run_child(supervisor_pid)`` and exits with its code.

    Call with :func:`stop_signals_blocked`: the child starts with SIGTERM/SIGINT
    pending, and ``run_child`` unblocks them once it handles them (a stop that
    arrives while the child starts up is then a graceful one)."""
    connections.close_all()
    supervisor_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            # The supervisor's handlers would forward signals to this child's siblings.
            for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, signal.SIG_DFL)
            bell.close()
            os.setpgid(0, 0)
            die_with_parent(supervisor_pid)
            code = run_child(supervisor_pid)
        except BaseException:
            logger.exception("worker process crashed")
        finally:
            os._exit(code)
    return pid


@dataclass
class _Slot:
    """One of the N places a child runs in, and how its children have been ending."""

    started_at: float = 0.0
    crashes_in_a_row: int = 0
    restart_at: float | None = None
    done: bool = False

    def ended(self, code: int, now: float, burst: bool) -> None:
        """Records a child's exit and schedules the next start (none with ``burst``)."""
        if burst:
            self.done = True
            return
        # A process replaced because a job timed out did not crash.
        crashed_early = code not in (0, EXIT_REPLACE) and now - self.started_at < STABLE_SECONDS
        self.crashes_in_a_row = self.crashes_in_a_row + 1 if crashed_early else 0
        pause = 0.0
        if self.crashes_in_a_row >= 2:
            pause = min(
                MAX_RESTART_PAUSE_SECONDS,
                FIRST_RESTART_PAUSE_SECONDS * 2 ** (self.crashes_in_a_row - 2),
            )
        self.restart_at = now + pause


@dataclass
class _Supervisor:
    processes: int
    run_child: Callable[[int], int]
    burst: bool
    bell: Bell = field(default_factory=Bell)
    children: dict[int, int] = field(default_factory=dict)  # pid -> slot number
    slots: list[_Slot] = field(default_factory=list)
    signals_seen: int = 0
    exit_code: int = 0
    #: ``--health-file``: touched while every child touches its own.
    health: SupervisorHealth | None = None
    #: Told the pid of each child that exited (``--metrics-port`` drops its gauges).
    child_gone: Callable[[int], None] | None = None

    def on_signal(self, signum: int, frame: object) -> None:
        """Signal handler: forwards SIGTERM to every child and rings; takes no lock."""
        self.signals_seen += 1
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        self.bell.ring()

    def stop_for_good(self, pid: int) -> None:
        """Child ``pid`` met an error that retrying cannot cure (it logged which): the
        others would meet it too, and a replacement at once. Stops every child as a
        first signal does; the supervisor exits with :data:`EXIT_NOT_TRANSIENT`."""
        logger.error(
            "worker process %d stopped on an error that retrying cannot cure (see its "
            "log); stopping the others, replacing none; exit status %d",
            pid,
            EXIT_NOT_TRANSIENT,
        )
        self.exit_code = EXIT_NOT_TRANSIENT
        self.on_signal(signal.SIGTERM, None)

    def start(self, number: int) -> None:
        """Forks the child of slot ``number``, unless a stop signal has come: the check
        and the fork are one step for the handler (both with stop signals blocked), so
        a child is either forked before the handler runs, and gets its SIGTERM from
        it, or not forked at all."""
        slot = self.slots[number]
        slot.restart_at = None
        slot.started_at = time.monotonic()
        with stop_signals_blocked():
            if self.signals_seen:
                return
            pid = _fork_child(self.run_child, self.bell)
            self.children[pid] = number
        if self.health is not None:
            self.health.child_started(pid)

    def reap(self) -> None:
        """Collects every child that has exited, without blocking."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            number = self.children.pop(pid, None)
            if number is None:
                continue
            if self.health is not None:
                self.health.child_gone(pid)
            if self.child_gone is not None:
                self.child_gone(pid)
            code = os.waitstatus_to_exitcode(status)
            if code == EXIT_NOT_TRANSIENT and not self.signals_seen:
                self.stop_for_good(pid)
            if self.signals_seen:
                self.exit_code = self.exit_code or (0 if code == 0 else 1)
                continue
            slot = self.slots[number]
            slot.ended(code, time.monotonic(), self.burst)
            if not slot.done and code == EXIT_REPLACE:
                logger.info("worker process %d asked to be replaced; starting another", pid)
            elif not slot.done:
                logger.warning("worker process %d exited with %d; starting another", pid, code)
            elif code != 0:
                # A burst is one pass over the work: a restarted child could fail the
                # same way for ever; the caller learns of it from the exit status.
                self.exit_code = 1
                logger.error(
                    "worker process %d exited with %d during --burst; not replaced, "
                    "the supervisor will exit 1",
                    pid,
                    code,
                )

    def restart_due(self) -> float | None:
        """Starts the children whose restart is due; seconds until the next one."""
        if self.signals_seen:
            return None
        now = time.monotonic()
        waits = []
        for number, slot in enumerate(self.slots):
            if slot.restart_at is None:
                continue
            if slot.restart_at <= now:
                self.start(number)
            else:
                waits.append(slot.restart_at - now)
        return min(waits, default=None)

    def run(self) -> int:
        signal.signal(signal.SIGCHLD, lambda signum, frame: self.bell.ring())
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        self.slots = [_Slot() for _ in range(self.processes)]
        for number in range(self.processes):
            self.start(number)
        logger.info("supervisor %d started %d worker processes", os.getpid(), self.processes)
        while True:
            # Cleared before reaping: a child that exits from here on rings again.
            self.bell.clear()
            self.reap()
            pause = self.restart_due()
            if not self.children and pause is None:
                return self.exit_code
            if self.health is not None:
                self.health.check(list(self.children))
                pause = HEALTH_CHECK_SECONDS if pause is None else min(pause, HEALTH_CHECK_SECONDS)
            self.bell.wait(pause)


def supervise(
    processes: int,
    run_child: Callable[[int], int],
    *,
    burst: bool = False,
    health_file: str | None = None,
    child_gone: Callable[[int], None] | None = None,
) -> int:
    """Keeps ``processes`` children running ``run_child(supervisor_pid)`` until a
    signal stops them (or, with ``burst``, until each has exited); the exit code:
    0, or 1 when a child failed after a stop or during a burst. With ``health_file``
    it touches that file while every child touches its own (``worker.health_file``).
    ``child_gone(pid)`` is called once for each child reaped."""
    health = None if health_file is None else SupervisorHealth(health_file)
    return _Supervisor(processes, run_child, burst, health=health, child_gone=child_gone).run()
