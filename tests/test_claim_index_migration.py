"""Migration 0016 both ways, on both databases: the claim index led by the queue,
and (PostgreSQL) ``later_claim_counted`` merging the served queues; reversed, the
index in claim order and 0014's function, which claims as before."""

from __future__ import annotations

import uuid

import pytest
from django.core.management import call_command
from django.db import connections

from later_django.storage.stores import stores_for
from tests.test_migrations import released_migrations_run_on

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

FAR = 10**15  # a "now" after every message's available_at


def claim_index_columns(alias: str) -> str:
    with connections[alias].cursor() as cursor:
        if connections[alias].vendor == "postgresql":
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'later_delivery_queue_claim_idx'"
            )
        else:
            cursor.execute(
                "SELECT sql FROM sqlite_master WHERE name = 'later_delivery_queue_claim_idx'"
            )
        (definition,) = cursor.fetchone()
    return definition[definition.index("(") :]


def test_0016_leads_the_claim_index_with_the_queue_and_reverses(db_alias: str) -> None:
    released_migrations_run_on(db_alias)
    namespace = f"ns-{uuid.uuid4().hex[:12]}"
    queue = stores_for(db_alias).queue
    assert claim_index_columns(db_alias).startswith("(namespace, queue_name, priority DESC")
    call_command("migrate", "later_django", "0015", database=db_alias, verbosity=0)
    try:
        assert claim_index_columns(db_alias).startswith("(namespace, priority DESC, sequence")
        # The reversed claim (0014's function on PostgreSQL) still claims in order.
        queue.publish(namespace, "a", [b"a"])
        high = queue.publish(namespace, "b", [b"b"], priority=3)
        if connections[db_alias].vendor == "postgresql":
            with connections[db_alias].cursor() as cursor:
                cursor.execute(
                    "SELECT sequence FROM later_claim_counted(%s, %s, %s, 16, 'w', %s)",
                    [namespace, None, FAR, FAR + 1],
                )
                claimed = [sequence for (sequence,) in cursor.fetchall()]
            assert claimed == high
    finally:
        call_command("migrate", "later_django", database=db_alias, verbosity=0)
    assert claim_index_columns(db_alias).startswith("(namespace, queue_name, priority DESC")
