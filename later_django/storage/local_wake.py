"""The wake channel of a database without notifications: this process's own commits.

MySQL/MariaDB has no ``LISTEN``/``NOTIFY``. A transaction of this process that
published messages rings, when it commits, every subscription open in this process
(a worker's listener thread), so a job enqueued by a job, a web view or a shell of
the same process reaches the idle worker at once; work published by other processes
is found by the worker's poll (:mod:`later_django.worker.wakeup`). The payload is
:data:`ANY_NAMESPACE`: the commit does not say which namespace it published to, so
every waiting worker of the process looks (one indexed read each).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.db import connections, transaction

#: The payload of a local ring: no namespace matches "*" (namespaces are letters,
#: digits, "_" and "."), so a listener takes it as "for every namespace".
ANY_NAMESPACE = "*"

_subscribers: set[queue.SimpleQueue[str]] = set()
_lock = threading.Lock()


def _ring_all(payload: str = ANY_NAMESPACE) -> None:
    """Rings every subscription of the process (also the on-commit callback, whose
    identity marks a transaction that already rings)."""
    with _lock:
        subscribers = list(_subscribers)
    for subscriber in subscribers:
        subscriber.put(payload)


def ring_at_commit(using: str) -> None:
    """Rings this process's subscriptions when the transaction on ``using`` commits
    (once per transaction however many publishes it makes; nothing if it rolls back),
    or at once outside a transaction."""
    connection = connections[using]
    if connection.in_atomic_block and any(
        callback is _ring_all for _, callback, _ in connection.run_on_commit
    ):
        return
    transaction.on_commit(_ring_all, using=using)


class LocalSubscription:
    """The payloads rung in this process since the subscription opened."""

    def __init__(self, inbox: queue.SimpleQueue[str]) -> None:
        self._inbox = inbox

    def payloads(self, timeout: float) -> Iterable[str]:
        try:
            first = self._inbox.get(timeout=timeout)
        except queue.Empty:
            return []
        arrived = [first]
        while True:
            try:
                arrived.append(self._inbox.get_nowait())
            except queue.Empty:
                return arrived


class LocalWakeChannel:
    """A :class:`~later_django.storage.driver.WakeChannel` within one process."""

    @contextmanager
    def subscribe(self) -> Iterator[LocalSubscription]:
        inbox: queue.SimpleQueue[str] = queue.SimpleQueue()
        with _lock:
            _subscribers.add(inbox)
        try:
            yield LocalSubscription(inbox)
        finally:
            with _lock:
                _subscribers.discard(inbox)

    def send_probe(self, payload: str) -> None:
        _ring_all(payload)
