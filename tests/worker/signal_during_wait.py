"""Delivers SIGTERM to a worker at every line of its main thread's waits.

Run as ``python -m tests.worker.signal_during_wait`` with the environment of
:class:`tests.worker.test_worker_process.Workers`. For each wait the worker's
main loop makes (on its wake-up and on its stop, as in ``wait_for_work`` and the
database back-off), and for each Python line executed inside that wait, a fresh
worker waits, and SIGTERM is raised on the main thread exactly at that line: the
worker's handler then runs there, inside the wait, wherever the wait's own
locks stand. Each wait must end (at the latest at its timeout) with the worker
stopping. Prints ``ok <cases>`` at the end; a handler that blocks on a lock the
interrupted wait holds hangs the process instead, which the test's timeout turns
into a failure.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
from types import FrameType
from typing import Any

import django

WAIT_SECONDS = 0.2
#: Files whose lines count: the wait primitives'.
PRIMITIVES: set[str] = set()


def lines_inside(wait: Any, stop_at: int | None) -> int:
    """Runs ``wait(WAIT_SECONDS)`` tracing the lines executed inside it that belong to
    the wait primitives (``threading``, and the module of the waited object); raises SIGTERM
    at line number ``stop_at`` (counted from 1). Returns how many lines ran. The
    garbage collector is off meanwhile, so no finalizer adds lines to one run only."""
    count = 0

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if event == "line" and frame.f_code.co_filename in PRIMITIVES:
            count += 1
            if count == stop_at:
                signal.raise_signal(signal.SIGTERM)
        return trace

    gc.disable()
    sys.settrace(trace)
    try:
        wait(WAIT_SECONDS)
    finally:
        sys.settrace(None)
        gc.enable()
    return count


def main() -> None:
    django.setup()
    from later_django.worker.runner import Worker, WorkerOptions

    cases = 0
    for name in ("wake", "stopping"):
        # A dry run that nothing interrupts: how many lines a wait that times out runs.
        dry = Worker(WorkerOptions(queues=["default"]))
        # The wait primitive's module (and threading, which any primitive may use).
        PRIMITIVES.update(
            {threading.__file__, sys.modules[type(getattr(dry, name)).__module__].__file__}
        )
        total = lines_inside(getattr(dry, name).wait, None)
        for line in range(1, total + 1):
            worker = Worker(WorkerOptions(queues=["default"]))
            worker.install_signal_handlers()
            lines_inside(getattr(worker, name).wait, line)
            if not worker.stopping.is_set():
                print(f"{name}.wait, line {line} of {total}: the worker is not stopping")
                sys.exit(1)
            cases += 1
    print(f"ok {cases}")


if __name__ == "__main__":
    main()
