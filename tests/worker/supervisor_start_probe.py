"""Run as a script by ``test_supervisor_start``: a supervisor of two slots, both due for
a restart, whose stop signal comes while it forks its first child. In a process of its
own: forking the (multi-threaded) pytest process could leave a child stuck on a lock
some other thread held.

Prints one JSON line: how many stop signals the supervisor saw, and for each child it
started, how that child ended (``-15``: killed by the SIGTERM it was sent; ``0``: it
never heard of the stop and slept to its end) and how long that took.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import django
from django.conf import settings

#: How long a child lives when no SIGTERM reaches it.
UNSTOPPED_SECONDS = 4.0


def child(parent_pid: int) -> int:
    """A forked child: a SIGTERM held for it kills it (default action) once unblocked;
    without one it sleeps, then exits 0."""
    from later_django.worker.supervisor import STOP_SIGNALS

    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    time.sleep(UNSTOPPED_SECONDS)
    return 0


def main() -> None:
    settings.configure(INSTALLED_APPS=["later_django"], DATABASES={})
    django.setup()
    from later_django.worker import supervisor
    from later_django.worker.supervisor import _Slot, _Supervisor

    watched = _Supervisor(processes=2, run_child=child, burst=False)
    watched.slots = [_Slot(restart_at=0.0), _Slot(restart_at=0.0)]
    real_fork = supervisor._fork_child
    forks: list[int] = []

    def fork_then_stop(run_child, bell):  # type: ignore[no-untyped-def]
        pid = real_fork(run_child, bell)
        forks.append(pid)
        if len(forks) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # held until this fork is done
        return pid

    supervisor._fork_child = fork_then_stop
    signal.signal(signal.SIGTERM, watched.on_signal)
    watched.restart_due()
    started = time.monotonic()
    ends = []
    for pid in forks:
        _, status = os.waitpid(pid, 0)
        ends.append([os.waitstatus_to_exitcode(status), round(time.monotonic() - started, 2)])
    report = {
        "signals_seen": watched.signals_seen,
        "children_known": len(watched.children),
        "ends": ends,
        "due_again": watched.restart_due(),
    }
    print(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
