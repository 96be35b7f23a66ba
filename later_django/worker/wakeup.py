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

from later_django.storage.sql.queue import WAKE_CHANNEL
from later_django.worker.bell import Bell

logger = logging.getLogger("later_django.worker")

#: How long the LISTEN thread waits for a notification before it looks at its stop event.
LISTEN_WAIT_SECONDS = 0.1
#: How often a waiting SQLite worker reads ``PRAGMA data_version``.
SQLITE_POLL_SECONDS = 0.005


def listening_connection(using: str) -> Any:
    """A new autocommit psycopg connection to the database of ``using``, already in
    ``LISTEN later_django`` (its own session: Django's connection is left alone)."""
    import psycopg

    params = dict(connections[using].get_connection_params())
    # Django's cursor class and adapters context belong to its own connection.
    params.pop("cursor_factory", None)
    params.pop("context", None)
    connection = psycopg.connect(**params, autocommit=True)
    connection.execute(f'LISTEN "{WAKE_CHANNEL}"')
    return connection


class PostgresListener(threading.Thread):
    """Sets ``wake`` on every notification for ``namespace``; reconnects with back-off."""

    def __init__(self, using: str, namespace: str, wake: Bell, stop: threading.Event):
        super().__init__(name="later-listen", daemon=True)
        self.using = using
        self.namespace = namespace
        self.wake = wake
        self.stop = stop
        self.listening = threading.Event()

    def run(self) -> None:
        delay = 0.1
        while not self.stop.is_set():
            try:
                with listening_connection(self.using) as connection:
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
            except Exception as error:
                self.listening.clear()
                if self.stop.is_set():
                    return
                logger.warning("LISTEN connection lost (%s); retrying in %.1fs", error, delay)
                self.stop.wait(delay)
                delay = min(delay * 2, 5.0)


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
