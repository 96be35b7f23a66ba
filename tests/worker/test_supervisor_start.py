"""The supervisor's starts against its stop signal, in this process (real forks).

The storm test (``test_faults``) caught this once in CI: two children exited
together, the supervisor started their replacements, and its SIGTERM came while
the first was being forked. The signal was held until that fork was done, then
forwarded to the children it knew; the second replacement was forked after that
and never heard of the stop, so the supervisor waited for it for ever.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from later_django.worker import supervisor
from later_django.worker.supervisor import STOP_SIGNALS, _Slot, _Supervisor

#: How long a child lives when no SIGTERM reaches it.
UNSTOPPED_SECONDS = 4.0


def child(parent_pid: int) -> int:
    """A forked child: a SIGTERM held for it kills it (default action) once unblocked;
    without one it sleeps, then exits 0."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    time.sleep(UNSTOPPED_SECONDS)
    return 0


@pytest.fixture
def stopping_supervisor(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Supervisor]:
    """A supervisor of two slots, both due for a restart, whose SIGTERM handler is
    installed in this process and whose stop signal comes while it forks its first
    child (sent to itself, so held until the fork is done)."""
    watched = _Supervisor(processes=2, run_child=child, burst=False)
    watched.slots = [_Slot(restart_at=0.0), _Slot(restart_at=0.0)]
    real_fork = supervisor._fork_child
    forks = []

    def fork_then_stop(run_child, bell):  # type: ignore[no-untyped-def]
        pid = real_fork(run_child, bell)
        forks.append(pid)
        if len(forks) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return pid

    monkeypatch.setattr(supervisor, "_fork_child", fork_then_stop)
    # The fork closes Django's connections first; an event loop that an earlier test
    # left running in this thread (Playwright's) would make Django refuse that.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")
    previous = signal.signal(signal.SIGTERM, watched.on_signal)
    try:
        yield watched
    finally:
        signal.signal(signal.SIGTERM, previous)
        for pid in forks:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def test_no_child_is_started_after_a_stop_signal_that_came_during_a_start(
    stopping_supervisor: _Supervisor,
) -> None:
    stopping_supervisor.restart_due()

    assert stopping_supervisor.signals_seen == 1
    # Every child it started got the stop: none lives on to its sleep's end.
    started = dict(stopping_supervisor.children)
    assert len(started) == 1
    deadline = time.monotonic() + UNSTOPPED_SECONDS / 2
    for pid in started:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, f"child {pid} did not get the stop signal"
            time.sleep(0.02)
        assert os.waitstatus_to_exitcode(status) == -signal.SIGTERM
    # And no slot is due again: the supervisor is stopping.
    assert stopping_supervisor.restart_due() is None
