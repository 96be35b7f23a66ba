"""Claims for every queue (``queue_names=None``, a worker for ``QUEUES: []``) on the three drivers.

Each test works in its own namespace, so rows left by another test never show up.
"""

from __future__ import annotations

import pytest
from django.db import connections

from later_django.core.clock import now_ms
from later_django.storage.queue import SqlDeliveryQueue
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

OWNER = "test-host:1:abcdef"


def test_a_claim_for_every_queue_takes_each_queue_in_claim_order(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    low = queue.publish(namespace, "alpha", [b"a1", b"a2"], priority=0)
    high = queue.publish(namespace, "zeta", [b"z1"], priority=5)
    unusual = queue.publish(namespace, "queue with spaces & 'quotes'", [b"u1"], priority=0)
    queue.publish(f"{namespace}-elsewhere", "alpha", [b"other namespace"])

    claimed = queue.claim(namespace, None, OWNER, 30_000, batch_size=4)

    assert [m.sequence for m in claimed] == [*high, *low, *unusual]
    assert [m.queue_name for m in claimed] == [
        "zeta",
        "alpha",
        "alpha",
        "queue with spaces & 'quotes'",
    ]
    assert queue.claim(namespace, None, OWNER, 30_000) == []


def test_a_claim_for_every_queue_finds_a_queue_first_used_after_the_last_claim(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    queue.publish(namespace, "first", [b"1"])
    assert [m.queue_name for m in queue.claim(namespace, None, OWNER, 30_000)] == ["first"]

    queue.publish(namespace, "brand-new", [b"2"])

    assert queue.has_ready(namespace, None)
    assert [m.queue_name for m in queue.claim(namespace, None, OWNER, 30_000)] == ["brand-new"]
    assert not queue.has_ready(namespace, None)


def test_every_queue_still_means_ready_only(queue: SqlDeliveryQueue, namespace: str) -> None:
    queue.publish(namespace, "later", [b"deferred"], available_at_ms=now_ms() + 60_000)
    leased = queue.publish(namespace, "busy", [b"leased"])
    assert [m.sequence for m in queue.claim(namespace, ["busy"], "someone", 30_000)] == leased

    assert not queue.has_ready(namespace, None)
    assert queue.claim(namespace, None, OWNER, 30_000) == []


def test_a_list_of_queues_still_claims_only_those(queue: SqlDeliveryQueue, namespace: str) -> None:
    queue.publish(namespace, "wanted", [b"w"])
    queue.publish(namespace, "unwanted", [b"u"])

    assert [m.queue_name for m in queue.claim(namespace, ["wanted"], OWNER, 30_000)] == ["wanted"]
    assert not queue.has_ready(namespace, ["wanted"])
    assert queue.has_ready(namespace, ["unwanted"])
    with pytest.raises(ValueError, match="at least one queue"):
        queue.claim(namespace, [], OWNER, 30_000)


def test_the_postgresql_claim_function_takes_null_as_every_queue(postgres_alias: str) -> None:
    """Migration 0006's body, read back from the catalog (one function, same signature)."""
    with connections[postgres_alias].cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_function_identity_arguments(oid), prosrc FROM pg_proc "
            "WHERE proname = 'later_claim_batch'"
        )
        [(arguments, body)] = cursor.fetchall()
    assert arguments.startswith("p_namespace text, p_queue_names text[]")
    assert "p_queue_names IS NULL OR ready.queue_name = ANY(p_queue_names)" in body
