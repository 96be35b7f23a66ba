"""``later_worker --processes N``: a supervisor that forks N worker processes.

Each child runs a :class:`~later_django.worker.runner.Worker` in its own
process group (a terminal's Ctrl-C reaches only the supervisor, which passes
one signal on). The first SIGTERM/SIGINT is forwarded to every child, which
stops gracefully; a second one is forwarded too, and children exit at once.
A child that dies on its own (crash, OOM kill) is replaced after a short
pause. The supervisor exits 0 when every child exited 0 after a stop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable

from django.db import connections

logger = logging.getLogger("later_django.worker")

RESTART_PAUSE_SECONDS = 1.0


def _fork_child(run_child: Callable[[], int]) -> int:
    connections.close_all()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            code = run_child()
        except BaseException:
            logger.exception("worker process crashed")
        finally:
            os._exit(code)
    return pid


def supervise(processes: int, run_child: Callable[[], int]) -> int:
    """Keeps ``processes`` children running ``run_child`` until a signal stops them."""
    children: dict[int, int] = {}  # pid -> slot
    signals_seen = 0

    def forward(signum: int, frame: object) -> None:
        nonlocal signals_seen
        signals_seen += 1
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for slot in range(processes):
        children[_fork_child(run_child)] = slot
    logger.info("supervisor %d started %d worker processes", os.getpid(), processes)
    exit_code = 0
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        slot = children.pop(pid, None)
        if slot is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        if signals_seen:
            exit_code = exit_code or (0 if code == 0 else 1)
            continue
        logger.warning("worker process %d exited with %d; starting another", pid, code)
        time.sleep(RESTART_PAUSE_SECONDS)
        if not signals_seen:
            children[_fork_child(run_child)] = slot
    return exit_code
