"""A claim reads only the queues it serves (migration 0016), on SQLite, PostgreSQL and
MariaDB.

The claim index is led by the queue: a claim walks the head of each served queue
and merges them in claim order, so how much other queues hold (a paused queue, one
no worker here serves) never changes what a claim reads. The work is counted, not
timed: on PostgreSQL the claim index's entries returned in the claim's transaction
(``pg_stat_get_xact_tuples_returned``), on SQLite the virtual machine's steps of
the statement (a progress handler called at every step), on MariaDB the rows the
session's handlers read (``Handler_read%``, every index and table read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connections, transaction

from later_django.storage.queue import SqlDeliveryQueue
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

BACKLOG = 3_000


@contextmanager
def work_counted(alias: str) -> Iterator[Callable[[], int]]:
    """Counts the database's work inside the block; the yielded function reads it
    (PostgreSQL: claim-index entries returned; SQLite: virtual machine steps; MariaDB:
    rows read by the session's handlers)."""
    connection = connections[alias]
    if connection.vendor == "postgresql":
        sql = "SELECT pg_stat_get_xact_tuples_returned('later_delivery_queue_claim_idx'::regclass)"

        def returned() -> int:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                return int(cursor.fetchone()[0])

        with transaction.atomic(using=alias):
            before = returned()
            yield lambda: returned() - before
        return
    if connection.vendor == "mysql":

        def reads() -> int:
            with connection.cursor() as cursor:
                cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%%'")
                return sum(int(value) for _, value in cursor.fetchall())

        start = reads()
        yield lambda: reads() - start
        return
    connection.ensure_connection()
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    raw = connection.connection
    raw.set_progress_handler(step, 1)
    try:
        yield lambda: steps[0]
    finally:
        raw.set_progress_handler(None, 1)


def claim_work(queue: SqlDeliveryQueue, alias: str, namespace: str, names: Any) -> int:
    with work_counted(alias) as counted:
        queue.claim(namespace, names, "worker", lease_ms=60_000)
        return counted()


def ready_work(queue: SqlDeliveryQueue, alias: str, namespace: str, names: Any) -> int:
    with work_counted(alias) as counted:
        queue.has_ready(namespace, names)
        return counted()


def test_a_claims_work_does_not_grow_with_another_queues_backlog(
    queue: SqlDeliveryQueue, db_alias: str, namespace: str
) -> None:
    crowded = f"{namespace}-crowded"
    queue.publish(namespace, "mine", [b"m"] * 40)
    queue.publish(crowded, "mine", [b"m"] * 40)
    alone = claim_work(queue, db_alias, namespace, ["mine"])
    idle_alone = claim_work(queue, db_alias, namespace, ["idle"])
    # The other queue sorts before and after "mine" and outranks it: the old index
    # (namespace, priority, sequence) walked all of it ahead of "mine"'s rows.
    for other in ("a-unserved", "z-paused"):
        queue.publish(crowded, other, [b"o"] * BACKLOG, priority=10)

    beside = claim_work(queue, db_alias, crowded, ["mine"])
    idle_beside = claim_work(queue, db_alias, crowded, ["idle"])

    assert beside <= alone + 10, (alone, beside)
    assert idle_beside <= idle_alone + 10, (idle_alone, idle_beside)


def test_a_readiness_check_does_not_grow_with_another_queues_backlog(
    queue: SqlDeliveryQueue, db_alias: str, namespace: str
) -> None:
    crowded = f"{namespace}-crowded"
    queue.publish(crowded, "a-unserved", [b"o"] * BACKLOG, priority=10)

    alone = ready_work(queue, db_alias, namespace, ["idle"])
    beside = ready_work(queue, db_alias, crowded, ["idle"])

    assert not queue.has_ready(crowded, ["idle"])
    assert queue.has_ready(crowded, ["idle", "a-unserved"])
    assert beside <= alone + 10, (alone, beside)


def test_a_claim_of_every_queue_reads_each_queues_head_not_their_rows(
    queue: SqlDeliveryQueue, db_alias: str, namespace: str
) -> None:
    crowded = f"{namespace}-crowded"
    for name in ("a", "b", "c"):
        queue.publish(namespace, name, [b"x"] * 20)
        queue.publish(crowded, name, [b"x"] * BACKLOG)

    small = claim_work(queue, db_alias, namespace, None)
    large = claim_work(queue, db_alias, crowded, None)

    assert large <= small + 10, (small, large)


def test_a_claim_of_several_queues_takes_the_highest_priority_across_them(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    plain = queue.publish(namespace, "a", [b"a"] * 10)
    urgent = queue.publish(namespace, "b", [b"b"] * 4, priority=5)
    late_urgent = queue.publish(namespace, "a", [b"a"] * 3, priority=5)
    low = queue.publish(namespace, "c", [b"c"] * 10, priority=-5)

    claimed = queue.claim(namespace, ["c", "b", "a"], "worker", lease_ms=60_000)

    assert [message.sequence for message in claimed] == urgent + late_urgent + plain[:9]
    assert queue.depth(namespace, "c") == len(low)


def test_a_claim_of_every_queue_merges_them_in_priority_then_age_order(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    first = queue.publish(namespace, "z", [b"z"] * 6)
    second = queue.publish(namespace, "a", [b"a"] * 6)
    high = queue.publish(namespace, "m", [b"m"] * 6, priority=3)

    claimed = queue.claim(namespace, None, "worker", lease_ms=60_000, batch_size=16)

    assert [message.sequence for message in claimed] == high + first + second[:4]
    assert {message.queue_name for message in claimed} == {"z", "a", "m"}


def test_a_queue_named_twice_is_claimed_once(queue: SqlDeliveryQueue, namespace: str) -> None:
    published = queue.publish(namespace, "a", [b"a"] * 20)

    claimed = queue.claim(namespace, ["a", "a", "a"], "worker", lease_ms=60_000)

    assert [message.sequence for message in claimed] == published[:16]
    assert queue.depth(namespace, "a") == 4
