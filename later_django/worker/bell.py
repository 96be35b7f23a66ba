"""A wake-up that a signal handler may ring: a self-pipe, no lock.

``threading.Event.set`` takes the event's internal lock. A Python signal
handler runs on the main thread between two bytecodes, possibly while that
same thread is inside ``Event.wait`` holding that lock, and then ``set()``
waits for itself forever. Ringing a :class:`Bell` is one ``os.write`` to a
non-blocking pipe, safe from a signal handler and from any thread; waiting is
a ``poll`` of the pipe's other end, which a signal cannot wedge (after the
handler has rung, the retried ``poll`` sees the byte at once).
"""

from __future__ import annotations

import contextlib
import math
import os
import select


class Bell:
    """Rung (``ring``) until cleared (``clear``); ``wait`` returns as soon as it is rung.

    The same calls as ``threading.Event`` (``set`` is ``ring``), so threads that
    were given an Event need no change. ``is_set`` and ``wait`` are exact: the
    bell is rung while its pipe holds a byte. The file descriptors are closed
    when the bell is garbage-collected, or by ``close``.
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def ring(self) -> None:
        """Lock-free: a byte into the pipe (a full pipe is already rung)."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._write, b"\x01")

    set = ring

    def is_set(self) -> bool:
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> bool:
        """Until rung or ``timeout`` seconds (``None``: no limit); whether it is rung."""
        milliseconds = -1 if timeout is None else max(0, math.ceil(timeout * 1000))
        # poll, not select: no FD_SETSIZE limit in a process with many open files;
        # a poll object per call, since one object must not be polled by two threads.
        poller = select.poll()
        poller.register(self._read, select.POLLIN)
        return bool(poller.poll(milliseconds))

    def clear(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 4096):
                pass

    def close(self) -> None:
        """Closes both ends once (a later ``close`` does nothing)."""
        descriptors, self._read, self._write = (self._read, self._write), -1, -1
        for descriptor in descriptors:
            if descriptor >= 0:
                with contextlib.suppress(OSError):
                    os.close(descriptor)

    def __del__(self) -> None:
        self.close()
