"""The heartbeat thread owns the ``later_worker`` row: ``retire`` removes it after
the last beat, so a beat still in flight at the stop cannot write it back (CI saw
that on SQLite: a worker exited cleanly and left its row)."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from django.db import connections

from later_django.core.clock import now_ms
from later_django.storage.stores import stores_for
from later_django.storage.types import WorkerRow
from later_django.worker.heartbeat import Heartbeat

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

NS = "heartbeat-ns"


class SlowBeats:
    """The real execution store, with each heartbeat write held ``delay`` seconds
    before it is made; ``in_flight`` is set while one waits."""

    def __init__(self, real: object, delay: float) -> None:
        self._real = real
        self.delay = delay
        self.in_flight = threading.Event()

    def worker_heartbeat(self, namespace: str, worker: WorkerRow) -> None:
        self.in_flight.set()
        time.sleep(self.delay)
        self._real.worker_heartbeat(namespace, worker)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)


def worker_ids(alias: str) -> list[str]:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT worker_id FROM later_worker WHERE namespace = %s", [NS])
        return [worker_id for (worker_id,) in cursor]


def heartbeat(alias: str, executions: object, stop: threading.Event) -> Heartbeat:
    stores = dataclasses.replace(stores_for(alias), executions=executions)
    row = WorkerRow(
        worker_id="host:1:abc",
        host="host",
        pid=1,
        concurrency=1,
        queues=["default"],
        busy=0,
        started_at_ms=now_ms(),
        heartbeat_at_ms=now_ms(),
    )
    return Heartbeat(
        stores=stores,
        namespace=NS,
        worker=row,
        lease_ms=60,
        held=lambda: ([], []),
        finishing=set,
        stop=stop,
    )


def test_retire_removes_the_row_after_a_beat_in_flight(db_alias: str) -> None:
    slow = SlowBeats(stores_for(db_alias).executions, delay=0.4)
    thread = heartbeat(db_alias, slow, threading.Event())
    thread.start()
    assert slow.in_flight.wait(5), "the heartbeat never beat"

    thread.retire(timeout=5)

    assert not thread.is_alive()
    time.sleep(0.6)  # longer than the beat's delay: a write it still held would be in
    assert worker_ids(db_alias) == []


def test_retire_of_a_heartbeat_never_started_removes_the_row(db_alias: str) -> None:
    executions = stores_for(db_alias).executions
    thread = heartbeat(db_alias, executions, threading.Event())
    thread.beat()
    assert worker_ids(db_alias) == ["host:1:abc"]

    thread.retire(timeout=1)

    assert worker_ids(db_alias) == []
