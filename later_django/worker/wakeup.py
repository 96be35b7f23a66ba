"""How an idle worker learns that work may be waiting.

PostgreSQL: a thread holds its own connection in ``LISTEN later_django`` and
sets the worker's wake event when a transaction that published messages for
the worker's namespace commits (one notification per transaction). SQLite has
no notifications: the waiting worker reads ``PRAGMA data_version`` every few
milliseconds, a counter that changes when another connection commits, and
looks at the queue only then. Both also fall back to a periodic look, for
messages that become due by time alone (a hand-back with a delay, a lapsed
lease).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.db import connections

from later_django.storage.queries.queue import WAKE_CHANNEL
from later_django.worker.bell import Bell

logger = logging.getLogger("later_django.worker")

#: How long the LISTEN thread waits for its own probe notification before it warns
#: that its connection cannot listen (PgBouncer transaction pooling, for one).
PROBE_SECONDS = 2.0
#: How long the LISTEN thread waits for a notification before it looks at its stop event.
LISTEN_WAIT_SECONDS = 0.1
#: How often a waiting SQLite worker reads ``PRAGMA data_version``.
SQLITE_POLL_SECONDS = 0.005


def own_connection(using: str, **overrides: Any) -> Any:
    """A new autocommit psycopg connection to the database of ``using`` (its own
    session: Django's connection is left alone); ``overrides`` replace connection
    parameters (e.g. ``dbname``)."""
    import psycopg

    params = dict(connections[using].get_connection_params())
    # Django's cursor class and adapters context belong to its own connection.
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**{**params, **overrides}, autocommit=True)


def listening_connection(using: str) -> Any:
    """:func:`own_connection`, already in ``LISTEN later_django``."""
    from psycopg import sql

    connection = own_connection(using)
    connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(WAKE_CHANNEL)))
    return connection


class PostgresListener(threading.Thread):
    """Sets ``wake`` on every notification for ``namespace``; reconnects with back-off.

    After each ``LISTEN`` it notifies a probe payload from a second, short-lived
    connection (never a namespace payload, so no worker wakes for it) and warns
    once if the probe does not arrive within PROBE_SECONDS: behind a pooler in
    transaction mode notifications never reach the listening client (the server
    connection that listens is no longer linked to it), and the worker wakes only
    by its once-a-second look.
    """

    def __init__(self, using: str, namespace: str, wake: Bell, stop: threading.Event):
        super().__init__(name="later-listen", daemon=True)
        self.using = using
        self.namespace = namespace
        self.wake = wake
        self.stop = stop
        self.listening = threading.Event()

    def _send_probe(self) -> _Probe:
        # ":" never appears in a namespace, so no worker takes the probe for work.
        probe = _Probe(f"probe:{threading.get_native_id()}:{time.time_ns()}")
        try:
            with own_connection(self.using) as sender:
                sender.execute("SELECT pg_notify(%s, %s)", [WAKE_CHANNEL, probe.payload])
        except Exception as error:  # no slot for a second connection: the LISTEN still works
            logger.info("could not send the LISTEN probe (%s); not checking this connection", error)
            probe.returned = True
        return probe

    def run(self) -> None:
        delay = 0.1
        while not self.stop.is_set():
            try:
                with listening_connection(self.using) as connection:
                    probe = self._send_probe()
                    self.listening.set()
                    # A notification may have been missed while reconnecting.
                    self.wake.set()
                    delay = 0.1
                    while not self.stop.is_set():
                        # A short wait bounds how long a stopping worker waits for
                        # this thread to close its connection.
                        for notification in connection.notifies(timeout=LISTEN_WAIT_SECONDS):
                            if notification.payload == self.namespace:
                                self.wake.set()
                            elif notification.payload == probe.payload:
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


class SqliteChangeWatch:
    """Tells whether another connection committed since the last look."""

    def __init__(self, using: str) -> None:
        self.using = using
        self._version: int | None = None

    def changed(self) -> bool:
        with connections[self.using].cursor() as cursor:
            cursor.execute("PRAGMA data_version")
            version = cursor.fetchone()[0]
        changed = version != self._version
        self._version = version
        return changed


def wait_for_work(wake: Bell, timeout: float, watch: SqliteChangeWatch | None) -> bool:
    """Waits until ``wake`` is set, SQLite saw a commit, or ``timeout`` passes; clears
    ``wake`` and returns whether something happened (rather than the timeout)."""
    deadline = time.monotonic() + timeout
    if watch is None:
        happened = wake.wait(timeout)
        wake.clear()
        return happened
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if wake.wait(min(SQLITE_POLL_SECONDS, remaining)):
            wake.clear()
            return True
        if watch.changed():
            return True
