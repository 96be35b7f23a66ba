"""Conformance of ``QueuePort.delete_unclaimed`` (``stores_for(alias).queue``) on SQLite,
PostgreSQL and MariaDB: an unheld message is deleted, a held one is left to its holder."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections

from later_django.storage.stores import stores_for
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

NS = "ns"
QUEUE = "jobs"


def rows(db_alias: str) -> dict[int, tuple[Any, ...]]:
    """sequence -> (payload, lease_owner) of every message of ``NS``."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT sequence, payload, lease_owner FROM later_delivery_queue WHERE namespace = %s",
            [NS],
        )
        return {seq: (bytes(payload), owner) for seq, payload, owner in cursor.fetchall()}


def test_delete_unclaimed_deletes_a_message_nobody_claimed(db_alias: str) -> None:
    queue = stores_for(db_alias).queue
    first, second = queue.publish(NS, QUEUE, [b"one", b"two"])
    assert queue.depth(NS, QUEUE) == 2
    assert queue.delete_unclaimed(second) is True
    assert rows(db_alias) == {first: (b"one", None)}
    assert queue.depth(NS, QUEUE) == 1
    # Deleting it again, or a sequence that never existed, deletes nothing.
    assert queue.delete_unclaimed(second) is False
    assert queue.delete_unclaimed(second + 1_000) is False
    assert rows(db_alias) == {first: (b"one", None)}


def test_delete_unclaimed_leaves_a_held_message_to_its_holder(db_alias: str) -> None:
    queue = stores_for(db_alias).queue
    (held,) = queue.publish(NS, QUEUE, [b"held"])
    (claimed,) = queue.claim(NS, [QUEUE], "worker-1", 60_000, batch_size=1)
    assert claimed.sequence == held
    assert queue.delete_unclaimed(held) is False
    assert rows(db_alias) == {held: (b"held", "worker-1")}
    # The holder still owns it: it can ack it.
    assert queue.ack("worker-1", [held]) == 1
    assert rows(db_alias) == {}


def test_delete_unclaimed_deletes_a_message_handed_back(db_alias: str) -> None:
    queue = stores_for(db_alias).queue
    (sequence,) = queue.publish(NS, QUEUE, [b"back"])
    assert [m.sequence for m in queue.claim(NS, [QUEUE], "worker-1", 60_000)] == [sequence]
    assert queue.nack("worker-1", [sequence], delay_ms=60_000) == 1
    assert queue.delete_unclaimed(sequence) is True
    assert rows(db_alias) == {}
    assert queue.depth(NS, QUEUE) == 0
    # The former holder has nothing left to ack.
    assert queue.ack("worker-1", [sequence]) == 0
