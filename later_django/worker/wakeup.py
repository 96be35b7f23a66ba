"""How an idle worker learns that work may be waiting.

The driver says which way its database offers. With a wake channel
(PostgreSQL's ``LISTEN``) a :class:`NotificationListener` thread holds its
own subscription and rings the worker's wake bell when a transaction that
published messages for the worker's namespace commits (one notification per
transaction). Without one (SQLite) the waiting worker reads the driver's
change counter (:class:`ChangeWatch`) every millisecond while commits came
lately, every five after a quiet second; it changes when another connection
commits, and the worker looks at the queue only then. Without either
(MySQL/MariaDB: :attr:`~later_django.storage.driver.Driver.polls_for_work`) the
waiting worker looks at the queue every ``LATER["WORKER_POLL_INTERVAL"]`` seconds
(:class:`ReadyPoll`; the look is one indexed read while nothing is ready), and a
listener on the driver's in-process channel wakes it at once for what its own
process commits. All fall back to a periodic look, for messages that become due
by time alone (a hand-back with a delay, a lapsed lease).
"""

from __future__ import annotations

import logging
import threading
import time

from later_django.storage.driver import Driver, WakeChannel
from later_django.storage.local_wake import ANY_NAMESPACE
from later_django.worker.bell import Bell

logger = logging.getLogger("later_django.worker")

#: How long the listener waits for its own probe notification before it warns
#: that its connection cannot listen (PgBouncer transaction pooling, for one).
PROBE_SECONDS = 2.0
#: How long the listener waits for a notification before it looks at its stop event.
LISTEN_WAIT_SECONDS = 0.1
#: How often a waiting worker without notifications reads the change counter while
#: commits came lately (within RECENT_CHANGE_SECONDS), and otherwise: a commit is
#: seen within ~1 ms while work flows, and a long-idle worker reads a fifth as
#: often (measured here: ~3.5% of a core per idle process at 5 ms, ~7% at 1 ms).
CHANGE_POLL_SECONDS = 0.001
IDLE_CHANGE_POLL_SECONDS = 0.005
RECENT_CHANGE_SECONDS = 1.0


class NotificationListener(threading.Thread):
    """Rings ``wake`` on every notification for ``namespace``; reconnects with back-off.

    After each subscription it sends a probe payload from a second, short-lived
    connection (never a namespace payload, so no worker wakes for it) and warns
    once if the probe does not arrive within PROBE_SECONDS: behind a pooler in
    transaction mode notifications never reach the listening client (the server
    connection that listens is no longer linked to it), and the worker wakes only
    by its once-a-second look.
    """

    def __init__(self, channel: WakeChannel, namespace: str, wake: Bell, stop: threading.Event):
        super().__init__(name="later-listen", daemon=True)
        self.channel = channel
        self.namespace = namespace
        self.wake = wake
        self.stop = stop
        self.listening = threading.Event()

    def _send_probe(self) -> _Probe:
        # ":" never appears in a namespace, so no worker takes the probe for work.
        probe = _Probe(f"probe:{threading.get_native_id()}:{time.time_ns()}")
        try:
            self.channel.send_probe(probe.payload)
        except Exception as error:  # no slot for a second connection: the LISTEN still works
            logger.info("could not send the LISTEN probe (%s); not checking this connection", error)
            probe.returned = True
        return probe

    def run(self) -> None:
        delay = 0.1
        while not self.stop.is_set():
            try:
                with self.channel.subscribe() as subscription:
                    probe = self._send_probe()
                    self.listening.set()
                    # A notification may have been missed while reconnecting.
                    self.wake.set()
                    delay = 0.1
                    while not self.stop.is_set():
                        # A short wait bounds how long a stopping worker waits for
                        # this thread to close its connection.
                        for payload in subscription.payloads(LISTEN_WAIT_SECONDS):
                            if payload in (self.namespace, ANY_NAMESPACE):
                                self.wake.set()
                            elif payload == probe.payload:
                                probe.returned = True
                        probe.warn_if_lost()
            except Exception as error:
                self.listening.clear()
                if self.stop.is_set():
                    return
                logger.warning("LISTEN connection lost (%s); retrying in %.1fs", error, delay)
                self.stop.wait(delay)
                delay = min(delay * 2, 5.0)


class _Probe:
    """The listener's own notification, sent once per connection."""

    def __init__(self, payload: str) -> None:
        self.payload = payload
        self.sent_at = time.monotonic()
        self.returned = False
        self.warned = False

    def warn_if_lost(self) -> None:
        if self.returned or self.warned or time.monotonic() - self.sent_at < PROBE_SECONDS:
            return
        self.warned = True
        logger.warning(
            "LISTEN received no notification within %.0fs of its own probe: this "
            "connection cannot listen (PgBouncer in transaction pooling?), so the worker "
            "wakes only by its once-a-second look; give workers session pooling or a "
            "direct connection (docs/operations.md, PgBouncer)",
            PROBE_SECONDS,
        )


class ChangeWatch:
    """Tells whether another connection committed since the last look."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self._version: int | None = None
        self._changed_at = time.monotonic()

    def changed(self) -> bool:
        version = self.driver.change_counter()
        changed = version != self._version
        self._version = version
        if changed:
            self._changed_at = time.monotonic()
        return changed

    def poll_seconds(self) -> float:
        """How long to wait before the next look (see CHANGE_POLL_SECONDS)."""
        if time.monotonic() - self._changed_at < RECENT_CHANGE_SECONDS:
            return CHANGE_POLL_SECONDS
        return IDLE_CHANGE_POLL_SECONDS


class ReadyPoll:
    """Says "look" every ``interval`` seconds: the waiting worker then reads whether
    anything is ready (the loop's ``has_ready``, before any claim), for databases
    where nothing tells it that another process committed."""

    def __init__(self, interval: float) -> None:
        self.interval = interval

    def changed(self) -> bool:
        return True

    def poll_seconds(self) -> float:
        return self.interval


Watch = ChangeWatch | ReadyPoll


def start_wakeup(
    driver: Driver,
    namespace: str,
    wake: Bell,
    stop: threading.Event,
    poll_interval: float,
) -> tuple[NotificationListener | None, Watch | None]:
    """The driver's ways to wake: a started listener (its wake channel, if any), and
    for :func:`wait_for_work` a poll every ``poll_interval`` seconds where the driver
    needs one, else a watch of its change counter where it has no channel."""
    channel = driver.wake_channel()
    listener = None
    if channel is not None:
        listener = NotificationListener(channel, namespace, wake, stop)
        listener.start()
    if driver.polls_for_work:
        return listener, ReadyPoll(poll_interval)
    return listener, ChangeWatch(driver) if channel is None else None


def wait_for_work(wake: Bell, timeout: float, watch: Watch | None) -> bool:
    """Waits until ``wake`` is rung, the watch saw a commit, or ``timeout`` passes;
    clears ``wake`` and returns whether something happened (rather than the timeout)."""
    deadline = time.monotonic() + timeout
    if watch is None:
        happened = wake.wait(timeout)
        wake.clear()
        return happened
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if wake.wait(min(watch.poll_seconds(), remaining)):
            wake.clear()
            return True
        if watch.changed():
            return True
