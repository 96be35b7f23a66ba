"""The delivery queue on real SQLite, PostgreSQL and MariaDB databases.

Each test works in its own namespace, so rows and depth counters left by
another test never show up in its assertions.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections, transaction

from later_django.core.clock import now_ms
from later_django.storage.queue import SqlDeliveryQueue
from later_django.storage.stores import stores_for
from later_django.storage.types import ClaimedMessage
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

QUEUE = "jobs"


def scalar(alias: str, sql: str, params: list[Any]) -> Any:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def unleased_rows(alias: str, namespace: str, queue_name: str = QUEUE) -> int:
    """The depth by brute force: rows without a lease."""
    return scalar(
        alias,
        "SELECT COUNT(*) FROM later_delivery_queue "
        "WHERE namespace = %s AND queue_name = %s AND lease_until IS NULL",
        [namespace, queue_name],
    )


def rows_in(alias: str, namespace: str) -> int:
    return scalar(
        alias, "SELECT COUNT(*) FROM later_delivery_queue WHERE namespace = %s", [namespace]
    )


def lease_owner_of(alias: str, sequence: int) -> str | None:
    return scalar(
        alias, "SELECT lease_owner FROM later_delivery_queue WHERE sequence = %s", [sequence]
    )


def poll(attempt: Callable[[], Any], timeout_seconds: float = 5.0) -> Any:
    """Calls ``attempt`` until it returns something truthy; fails after the deadline."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = attempt()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"nothing after {timeout_seconds} s")
        time.sleep(0.01)


def payloads(count: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}{number:03}".encode() for number in range(count)]


def sequences_of(messages: list[ClaimedMessage]) -> list[int]:
    return [message.sequence for message in messages]


# --- publish ---


def test_publish_returns_sequences_in_payload_order_and_claims_return_the_bytes(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    sent = [b"\x00\xff binary", b"", b"\x93\x01\x02\x03"]
    sequences = queue.publish(namespace, QUEUE, sent)

    assert len(sequences) == 3 and sequences == sorted(sequences)
    received = {}
    for _ in sent:
        (message,) = queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000)
        assert isinstance(message.payload, bytes)
        received[message.sequence] = message.payload
    assert received == dict(zip(sequences, sent, strict=True))


def test_publish_of_nothing_returns_no_sequences(queue: SqlDeliveryQueue, namespace: str) -> None:
    assert queue.publish(namespace, QUEUE, []) == []
    assert rows_in(queue.using, namespace) == 0


def test_publish_beyond_the_bound_variable_limit_is_split_and_keeps_order(
    queue: SqlDeliveryQueue, namespace: str, db_alias: str
) -> None:
    connection = connections[db_alias]
    connection.ensure_connection()
    if connection.vendor == "sqlite":
        # Two rows (five variables each) per statement: seven payloads take four.
        limit = sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER
        previous = connection.connection.setlimit(limit, 12)
        try:
            sequences = queue.publish(namespace, QUEUE, payloads(7))
        finally:
            connection.connection.setlimit(limit, previous)
    else:
        sequences = queue.publish(namespace, QUEUE, payloads(7))

    assert len(sequences) == 7 and sequences == sorted(sequences)
    assert rows_in(db_alias, namespace) == 7
    claimed = queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000, batch_size=7)
    assert [message.payload for message in claimed] == payloads(7)


def test_a_publish_rolled_back_with_the_callers_transaction_leaves_nothing(
    queue: SqlDeliveryQueue, namespace: str, db_alias: str
) -> None:
    with pytest.raises(RuntimeError), transaction.atomic(using=db_alias):
        queue.publish(namespace, QUEUE, payloads(3))
        assert queue.depth(namespace, QUEUE) == 3
        raise RuntimeError("the caller's work failed")

    assert rows_in(db_alias, namespace) == 0
    assert queue.depth(namespace, QUEUE) == 0


# --- claim: batch size ---


def test_claim_takes_a_full_batch_when_at_least_batch_size_are_ready(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    queue.publish(namespace, QUEUE, payloads(40))

    claimed = queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000)

    assert len(claimed) == 16
    assert all(message.lease_owner == "worker" for message in claimed)


def test_claim_takes_one_when_fewer_than_batch_size_are_ready(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    queue.publish(namespace, QUEUE, payloads(5))

    assert len(queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000)) == 1


def test_claim_takes_the_whole_batch_when_exactly_batch_size_are_ready(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    sequences = queue.publish(namespace, QUEUE, payloads(4))

    claimed = queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000, batch_size=4)

    assert sequences_of(claimed) == sequences


def test_claim_returns_nothing_from_an_empty_queue(queue: SqlDeliveryQueue, namespace: str) -> None:
    assert queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000) == []


# --- claim: which messages, in which order ---


def test_claims_take_higher_priority_first_then_oldest(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    (low,) = queue.publish(namespace, QUEUE, [b"low"], priority=-100)
    (first_normal,) = queue.publish(namespace, QUEUE, [b"normal-1"])
    (urgent,) = queue.publish(namespace, QUEUE, [b"urgent"], priority=100)
    (second_normal,) = queue.publish(namespace, QUEUE, [b"normal-2"])
    (high,) = queue.publish(namespace, QUEUE, [b"high"], priority=10)

    order = []
    while claimed := queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000):
        order += sequences_of(claimed)

    assert order == [urgent, high, first_normal, second_normal, low]


def test_a_batch_comes_back_in_priority_then_age_order(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    normal = queue.publish(namespace, QUEUE, payloads(10, "n"))
    high = queue.publish(namespace, QUEUE, payloads(4, "h"), priority=5)
    low = queue.publish(namespace, QUEUE, payloads(10, "l"), priority=-5)

    claimed = queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000, batch_size=16)

    assert sequences_of(claimed) == high + normal + low[:2]
    assert [message.priority for message in claimed] == [5] * 4 + [0] * 10 + [-5] * 2


def test_claim_never_takes_messages_of_other_queues_or_namespaces(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    mine = queue.publish(namespace, "a", [b"a"]) + queue.publish(namespace, "b", [b"b"])
    queue.publish(namespace, "c", payloads(20), priority=100)
    other_namespace = f"{namespace}-other"
    queue.publish(other_namespace, "a", payloads(20), priority=100)

    claimed = []
    while batch := queue.claim(namespace, ["a", "b"], "worker", lease_ms=10_000):
        claimed += batch

    assert sorted(sequences_of(claimed)) == mine
    assert {message.queue_name for message in claimed} == {"a", "b"}
    assert queue.depth(namespace, "c") == 20
    assert queue.depth(other_namespace, "a") == 20


def test_a_deferred_message_is_not_claimed_until_due(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    due_at = now_ms() + 200
    (sequence,) = queue.publish(namespace, QUEUE, [b"later"], available_at_ms=due_at)

    assert queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000) == []
    (message,) = poll(lambda: queue.claim(namespace, [QUEUE], "worker", lease_ms=10_000))
    assert message.sequence == sequence
    assert message.available_at_ms == due_at
    assert now_ms() >= due_at


# --- leases ---


def test_a_lapsed_lease_is_reclaimed_and_the_old_owner_can_no_longer_touch_it(
    queue: SqlDeliveryQueue, namespace: str, db_alias: str
) -> None:
    (sequence,) = queue.publish(namespace, QUEUE, [b"work"])
    (taken_by_a,) = queue.claim(namespace, [QUEUE], "a", lease_ms=100)

    assert queue.claim(namespace, [QUEUE], "b", lease_ms=10_000) == []
    (taken_by_b,) = poll(lambda: queue.claim(namespace, [QUEUE], "b", lease_ms=10_000))

    assert taken_by_b.sequence == taken_by_a.sequence == sequence
    assert now_ms() >= taken_by_a.lease_until_ms
    assert queue.renew("a", [sequence], lease_ms=10_000) == []
    assert queue.ack("a", [sequence]) == 0
    assert queue.nack("a", [sequence]) == 0
    assert lease_owner_of(db_alias, sequence) == "b"
    assert queue.ack("b", [sequence]) == 1


def test_renew_extends_the_lease_so_no_other_owner_can_claim_it(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    (sequence,) = queue.publish(namespace, QUEUE, [b"long job"])
    (claimed,) = queue.claim(namespace, [QUEUE], "a", lease_ms=150)

    assert queue.renew("a", [sequence, sequence + 1_000_000], lease_ms=10_000) == [sequence]
    poll(lambda: now_ms() > claimed.lease_until_ms + 50)

    assert queue.claim(namespace, [QUEUE], "b", lease_ms=10_000) == []
    assert queue.renew("b", [sequence], lease_ms=10_000) == []


def test_ack_deletes_only_the_owners_messages(
    queue: SqlDeliveryQueue, namespace: str, db_alias: str
) -> None:
    queue.publish(namespace, QUEUE, payloads(2))
    (of_a,) = queue.claim(namespace, [QUEUE], "a", lease_ms=10_000)
    (of_b,) = queue.claim(namespace, [QUEUE], "b", lease_ms=10_000)

    assert queue.ack("a", [of_a.sequence, of_b.sequence]) == 1
    assert queue.ack("a", [of_a.sequence]) == 0

    assert rows_in(db_alias, namespace) == 1
    assert lease_owner_of(db_alias, of_b.sequence) == "b"


def test_nack_hands_the_message_back_at_once(queue: SqlDeliveryQueue, namespace: str) -> None:
    (sequence,) = queue.publish(namespace, QUEUE, [b"retry me"])
    queue.claim(namespace, [QUEUE], "a", lease_ms=10_000)

    assert queue.nack("b", [sequence]) == 0
    assert queue.nack("a", [sequence]) == 1

    (again,) = queue.claim(namespace, [QUEUE], "b", lease_ms=10_000)
    assert again.sequence == sequence and again.lease_owner == "b"


def test_nack_with_delay_hides_the_message_until_due_then_it_is_claimable_again(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    (sequence,) = queue.publish(namespace, QUEUE, [b"retry me later"])
    queue.claim(namespace, [QUEUE], "a", lease_ms=10_000)
    handed_back_at = now_ms()

    assert queue.nack("a", [sequence], delay_ms=200) == 1
    assert queue.claim(namespace, [QUEUE], "b", lease_ms=10_000) == []
    assert queue.depth(namespace, QUEUE) == 1

    (again,) = poll(lambda: queue.claim(namespace, [QUEUE], "b", lease_ms=10_000))
    assert again.sequence == sequence
    assert again.available_at_ms >= handed_back_at + 200
    assert now_ms() >= again.available_at_ms


def test_lease_methods_with_no_sequences_change_nothing(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    queue.publish(namespace, QUEUE, [b"x"])
    queue.claim(namespace, [QUEUE], "a", lease_ms=10_000)

    assert queue.renew("a", [], lease_ms=10_000) == []
    assert queue.ack("a", []) == 0
    assert queue.nack("a", []) == 0
    assert rows_in(queue.using, namespace) == 1


def test_a_claim_rolled_back_with_the_callers_transaction_leaves_the_message_ready(
    queue: SqlDeliveryQueue, namespace: str, db_alias: str
) -> None:
    (sequence,) = queue.publish(namespace, QUEUE, [b"x"])

    with pytest.raises(RuntimeError), transaction.atomic(using=db_alias):
        assert sequences_of(queue.claim(namespace, [QUEUE], "a", lease_ms=10_000)) == [sequence]
        raise RuntimeError("the caller's work failed")

    assert lease_owner_of(db_alias, sequence) is None
    assert queue.depth(namespace, QUEUE) == 1


# --- depth ---


def test_depth_matches_the_unleased_rows_through_every_kind_of_change(
    queue: SqlDeliveryQueue, namespace: str, db_alias: str
) -> None:
    def assert_depth(expected: int) -> None:
        assert queue.depth(namespace, QUEUE) == unleased_rows(db_alias, namespace) == expected

    sequences = queue.publish(namespace, QUEUE, payloads(20))
    assert_depth(20)

    batch = queue.claim(namespace, [QUEUE], "a", lease_ms=10_000)
    assert len(batch) == 16
    assert_depth(4)

    assert queue.nack("a", sequences_of(batch[:3])) == 3
    assert_depth(7)

    assert queue.ack("a", sequences_of(batch[3:8])) == 5
    assert_depth(7)

    assert queue.renew("a", sequences_of(batch[8:]), lease_ms=10_000) == sequences_of(batch[8:])
    assert_depth(7)

    ready = [s for s in sequences if s not in sequences_of(batch[3:])]
    with connections[db_alias].cursor() as cursor:
        cursor.execute("DELETE FROM later_delivery_queue WHERE sequence = %s", [ready[0]])
    assert_depth(6)

    # A lapsed lease keeps ``lease_until`` set: reclaiming it changes nothing.
    (short,) = queue.claim(namespace, [QUEUE], "b", lease_ms=50)
    assert_depth(5)
    poll(lambda: now_ms() > short.lease_until_ms)
    remaining = queue.claim(namespace, [QUEUE], "c", lease_ms=10_000, batch_size=6)
    assert len(remaining) == 5 + 1
    assert short.sequence in sequences_of(remaining)
    assert_depth(0)

    # Acking a claimed row changes nothing; acking everything leaves nothing.
    assert queue.ack("c", sequences_of(remaining)) == 6
    assert queue.ack("a", sequences_of(batch[8:])) == 8
    assert_depth(0)
    assert rows_in(db_alias, namespace) == 0


def test_depth_of_a_namespace_sums_every_queue_of_it(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    # Reserved names are refused at enqueue (LaterBackend), not filtered here.
    queue.publish(namespace, "a", payloads(3))
    queue.publish(namespace, "b", payloads(2))
    queue.publish(namespace, "c", payloads(4))
    queue.publish(f"{namespace}-other", "a", payloads(7))

    assert queue.depth(namespace) == 9
    assert queue.depth(namespace, "c") == 4
    assert queue.depth(namespace, "missing") == 0
    assert queue.depth(f"{namespace}-none") == 0


# --- concurrency ---


@pytest.mark.parametrize("claimers", [2, 4])
def test_concurrent_claimers_deliver_every_message_exactly_once(
    db_alias: str, namespace: str, claimers: int
) -> None:
    sequences = stores_for(db_alias).queue.publish(namespace, QUEUE, payloads(200))
    delivered: list[list[int]] = [[] for _ in range(claimers)]
    errors: list[BaseException] = []
    start = threading.Barrier(claimers)

    def consume(index: int) -> None:
        try:
            own_queue = stores_for(db_alias).queue
            owner = f"worker-{index}"
            start.wait()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                claimed = own_queue.claim(namespace, [QUEUE], owner, lease_ms=60_000)
                if claimed:
                    delivered[index] += sequences_of(claimed)
                    assert own_queue.ack(owner, sequences_of(claimed)) == len(claimed)
                elif rows_in(db_alias, namespace) == 0:
                    return
            raise AssertionError(f"{owner} did not finish in time")
        except BaseException as error:  # reported by the test thread
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(claimers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)

    assert not any(thread.is_alive() for thread in threads), "a claimer hung"
    assert errors == []
    everything = [sequence for own in delivered for sequence in own]
    assert sorted(everything) == sequences, "every message exactly once"
    assert rows_in(db_alias, namespace) == 0
    assert stores_for(db_alias).queue.depth(namespace, QUEUE) == 0


# --- validation ---


@pytest.mark.parametrize("priority", [101, -101, 1.5, "1", True])
def test_a_priority_outside_the_tasks_range_is_refused_and_nothing_is_written(
    queue: SqlDeliveryQueue, namespace: str, priority: Any
) -> None:
    with pytest.raises(ValueError, match=repr(priority).replace(".", r"\.")):
        queue.publish(namespace, QUEUE, [b"x"], priority=priority)
    assert rows_in(queue.using, namespace) == 0
    assert queue.depth(namespace, QUEUE) == 0


def test_a_priority_error_names_the_range(queue: SqlDeliveryQueue, namespace: str) -> None:
    with pytest.raises(ValueError, match=r"101.*-100\.\.100"):
        queue.publish(namespace, QUEUE, [b"x"], priority=101)


def test_the_edges_of_the_priority_range_are_accepted(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    assert len(queue.publish(namespace, QUEUE, [b"x"], priority=100)) == 1
    assert len(queue.publish(namespace, QUEUE, [b"y"], priority=-100)) == 1


def test_an_empty_queue_name_is_refused_and_nothing_is_written(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    with pytest.raises(ValueError, match=r"queue_name.*''"):
        queue.publish(namespace, "", [b"x"])
    assert rows_in(queue.using, namespace) == 0


def test_a_payload_that_is_not_bytes_is_refused_and_nothing_is_written(
    queue: SqlDeliveryQueue, namespace: str
) -> None:
    with pytest.raises(TypeError, match="str"):
        queue.publish(namespace, QUEUE, [b"ok", "text"])  # type: ignore[list-item]
    assert rows_in(queue.using, namespace) == 0


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"queue_names": []}, r"queue_names.*\[\]"),
        ({"queue_names": "jobs"}, "queue_names.*'jobs'"),
        ({"queue_names": [""]}, "queue_name.*''"),
        ({"batch_size": 0}, "batch_size.*0"),
        ({"lease_ms": 0}, "lease_ms.*0"),
        ({"lease_ms": -5}, "lease_ms.*-5"),
    ],
)
def test_invalid_claim_arguments_are_refused_and_nothing_is_leased(
    queue: SqlDeliveryQueue, namespace: str, arguments: dict[str, Any], named: str
) -> None:
    queue.publish(namespace, QUEUE, [b"x"])
    call = {"queue_names": [QUEUE], "owner": "a", "lease_ms": 10_000, **arguments}

    with pytest.raises(ValueError, match=named):
        queue.claim(namespace, **call)
    assert unleased_rows(queue.using, namespace) == 1
    assert queue.depth(namespace, QUEUE) == 1


def test_invalid_lease_arguments_are_refused(queue: SqlDeliveryQueue, namespace: str) -> None:
    (sequence,) = queue.publish(namespace, QUEUE, [b"x"])
    queue.claim(namespace, [QUEUE], "a", lease_ms=10_000)

    with pytest.raises(ValueError, match=r"lease_ms.*0"):
        queue.renew("a", [sequence], lease_ms=0)
    with pytest.raises(ValueError, match=r"delay_ms.*-1"):
        queue.nack("a", [sequence], delay_ms=-1)
    assert lease_owner_of(queue.using, sequence) == "a"


def test_the_postgres_claim_walks_the_claim_index_even_with_stale_statistics(
    postgres_alias: str,
) -> None:
    """The claim function's own settings keep the ordered index walk as the plan.

    A burst of 20,000 messages into a table with no statistics yet (as after
    the test flush's TRUNCATE, or a fresh install before autovacuum's first
    ANALYZE) makes the planner expect a handful of rows: without the function's
    settings it picks a bitmap scan that sorts every ready message on each claim.
    """
    queue = stores_for(postgres_alias).queue
    with connections[postgres_alias].cursor() as cursor:
        cursor.execute("SELECT proconfig FROM pg_proc WHERE proname = 'later_claim_counted'")
        (function_settings,) = cursor.fetchone()
    assert sorted(function_settings) == ["enable_bitmapscan=off", "enable_seqscan=off"]
    for _ in range(20):
        queue.publish("ns", "default", [b"m"] * 1_000)

    # One served queue's head, as the function's lateral walk reads it (0016).
    candidates = (
        "EXPLAIN SELECT sequence FROM later_delivery_queue "
        "WHERE namespace = %s AND queue_name = %s AND available_at <= %s "
        "AND (lease_until IS NULL OR lease_until <= %s) "
        "ORDER BY priority DESC, sequence LIMIT 16 FOR UPDATE SKIP LOCKED"
    )
    params = ["ns", "default", now_ms(), now_ms()]
    with transaction.atomic(using=postgres_alias), connections[postgres_alias].cursor() as cursor:
        for setting in function_settings:
            name, value = setting.split("=")
            cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
        cursor.execute(candidates, params)
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "Index Scan using later_delivery_queue_claim_idx" in plan, plan
    assert "Sort" not in plan, plan
    claimed = queue.claim("ns", ["default"], "owner", lease_ms=1_000)
    assert [message.sequence for message in claimed] == sorted(m.sequence for m in claimed)
    assert len(claimed) == 16
