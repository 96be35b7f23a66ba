"""The worker's lock-free wake-up: rung by threads and by signal handlers."""

from __future__ import annotations

import os
import signal
import threading
import time

from later_django.worker.bell import Bell


def test_a_bell_stays_rung_until_cleared_and_wait_times_out_when_it_is_not() -> None:
    bell = Bell()
    assert not bell.is_set()
    started = time.monotonic()
    assert bell.wait(0.05) is False
    assert time.monotonic() - started >= 0.04
    bell.ring()
    bell.set()
    assert bell.is_set() and bell.wait(5) and bell.wait(None)
    bell.clear()
    assert not bell.is_set()
    bell.close()
    bell.close()


def test_a_ring_from_another_thread_ends_a_wait_at_once() -> None:
    bell = Bell()
    threading.Timer(0.05, bell.ring).start()
    started = time.monotonic()
    assert bell.wait(10)
    assert time.monotonic() - started < 5


def test_a_signal_handler_that_rings_ends_a_wait_on_the_same_thread() -> None:
    """The handler runs on the thread that waits (as in the worker); the wait ends
    instead of resuming until its timeout."""
    bell = Bell()
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: bell.ring())
    try:
        threading.Timer(0.05, os.kill, [os.getpid(), signal.SIGUSR1]).start()
        started = time.monotonic()
        assert bell.wait(10)
        assert time.monotonic() - started < 5
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_full_pipe_is_still_rung_and_ringing_it_never_blocks() -> None:
    bell = Bell()
    for _ in range(200_000):  # far more bytes than a pipe holds
        bell.ring()
    assert bell.is_set()
    bell.clear()
    assert not bell.is_set()
