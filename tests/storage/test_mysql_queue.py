"""The delivery queue's MySQL/MariaDB shapes (issue 36), on the ``mariadb`` alias.

* The claim walks each served queue's head down the claim index, never sorting: one
  queue, or several as ``UNION ALL`` parts (``queue_name IN (...)`` sorts, which
  locks every candidate).
* Two claimers never wait on each other (``FOR UPDATE SKIP LOCKED``): one holding
  its claim open leaves the next messages to the other at once, and two looping
  over one queue meet no lock wait and share no message.
* The list writes (claim, renew, ack, nack) lock only their own rows, even where
  the table's statistics count a handful of rows (the optimizer would read the
  table in full: two claimers then deadlocked).
* A publish answers each row's sequence from the ids its inserts took: a batch cut
  into several statements, a server that spaces its ids, and the interleaved lock
  mode (MySQL 8's default) where each row is its own insert.

Every claimer session here is in another counter shard than the others
(``CONNECTION_ID() % 8``): a claim's UPDATE adds to its queue's depth row of its
shard (migration 0019), and two sessions of one shard queue there for each other's
commit, by design, and not for the queue's rows, which these tests are about.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import pytest
from django.db import OperationalError, connections, transaction
from django.test.utils import CaptureQueriesContext

from later_django.core.clock import now_ms
from later_django.storage.mysql import MysqlDriver
from later_django.storage.mysql.queries.queue import MysqlQueueQueries
from later_django.storage.queue import SqlDeliveryQueue, heads_statement
from later_django.storage.stores import stores_for
from tests.conftest import use_database

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True

CLAIM_INDEX = "later_delivery_queue_claim_idx"
#: MySQL's error for a lock wait that outlived ``innodb_lock_wait_timeout``.
LOCK_WAIT_TIMEOUT = 1205


@pytest.fixture
def mariadb(request: pytest.FixtureRequest) -> str:
    return use_database(request, "mariadb")


@pytest.fixture
def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:12]}"


def fetch(alias: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def analyze(alias: str) -> None:
    """Fresh statistics for the queue table: the optimizer then knows how few rows it
    holds (as after a drain), which is when an unpinned join reads it in full."""
    fetch(alias, "ANALYZE TABLE later_delivery_queue")


def shard(alias: str) -> int:
    return int(fetch(alias, "SELECT CONNECTION_ID() % 8")[0][0])


def thread_id(alias: str) -> int:
    return int(fetch(alias, "SELECT CONNECTION_ID()")[0][0])


def own_shard(alias: str, taken: set[int]) -> int:
    """Reconnects this thread's connection until its counter shard is not in ``taken``
    (each connection has a new id); returns the shard."""
    for _ in range(64):
        mine = shard(alias)
        if mine not in taken:
            return mine
        connections[alias].close()
    raise AssertionError(f"no connection outside the shards {taken}")


@contextmanager
def lock_wait_timeout(alias: str, seconds: int) -> Iterator[None]:
    """This thread's session waits at most ``seconds`` for a row lock (1205 after)."""
    fetch(alias, "SET SESSION innodb_lock_wait_timeout = %s", [seconds])
    try:
        yield
    finally:
        fetch(alias, "SET SESSION innodb_lock_wait_timeout = DEFAULT")


def in_thread(target: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    """``target`` started on a thread of its own (its own connection, closed at the end);
    the list receives what it raised."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as error:  # reported by the test thread
            errors.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


# --- (a) the claim's plan ---


def plan_of(alias: str, sql: str, params: dict[str, Any]) -> dict[str, Any]:
    return json.loads(fetch(alias, "EXPLAIN FORMAT=JSON " + sql, params)[0][0])


def tables_of(plan: Any) -> list[dict[str, Any]]:
    """Every table access of an EXPLAIN FORMAT=JSON plan."""
    found = []
    if isinstance(plan, dict):
        if "table_name" in plan and "access_type" in plan:
            found.append(plan)
        for value in plan.values():
            found += tables_of(value)
    elif isinstance(plan, list):
        for value in plan:
            found += tables_of(value)
    return found


def claim_params(namespace: str, names: list[str]) -> dict[str, Any]:
    now = now_ms()
    return {
        "namespace": namespace,
        "now": now,
        "batch_size": 16,
        **{f"q{at}_queue_name": name for at, name in enumerate(names)},
    }


def assert_walks_the_claim_index(plan: dict[str, Any], parts: int) -> None:
    tables = tables_of(plan)
    assert len(tables) == parts, tables
    for table in tables:
        assert table["key"] == CLAIM_INDEX, table
        assert table["used_key_parts"] == ["namespace", "queue_name"], table
        assert table["access_type"] == "ref", table
    text = json.dumps(plan)
    assert "filesort" not in text, text
    assert "temporary" not in text, text


@pytest.mark.parametrize("rows", [3, 3_000])
@pytest.mark.parametrize("names", [["mail"], ["mail", "slow"]])
def test_the_claim_walks_the_claim_index_of_each_queue_with_no_sort(
    mariadb: str, namespace: str, rows: int, names: list[str]
) -> None:
    """A handful of rows (a drained queue: the optimizer would read the table) and a
    few thousand, with another queue of the namespace beside."""
    queue = stores_for(mariadb).queue
    for name in ("mail", "slow", "other"):
        queue.publish(namespace, name, [b"m"] * rows, priority=1 if name == "other" else 0)
    analyze(mariadb)
    head = MysqlQueueQueries.claim.head

    plan = plan_of(mariadb, heads_statement(head, len(names)), claim_params(namespace, names))

    assert_walks_the_claim_index(plan, len(names))


def test_the_plan_check_sees_the_sort_of_a_claim_of_several_queues_in_one_list(
    mariadb: str, namespace: str
) -> None:
    """The check above can fail: ``queue_name IN (...)`` sorts every candidate of
    those queues (and a locking read locks them all before the sort)."""
    queue = stores_for(mariadb).queue
    for name in ("mail", "slow"):
        queue.publish(namespace, name, [b"m"] * 3_000)
    analyze(mariadb)
    in_list = MysqlQueueQueries.claim.head.replace(
        "queue_name = %(queue_name)s", "queue_name IN (%(q0_queue_name)s, %(q1_queue_name)s)"
    )

    plan = plan_of(mariadb, in_list, claim_params(namespace, ["mail", "slow"]))

    assert "filesort" in json.dumps(plan)
    with pytest.raises(AssertionError):
        assert_walks_the_claim_index(plan, 1)


# --- the list writes lock their own rows only ---


@pytest.mark.parametrize(
    "statement",
    [
        MysqlQueueQueries.claim.take,
        MysqlQueueQueries.renew.writes[0],
        MysqlQueueQueries.renew.read,
        MysqlQueueQueries.ack,
        MysqlQueueQueries.nack,
    ],
    ids=["take", "renew", "renew-read", "ack", "nack"],
)
def test_a_list_write_looks_its_rows_up_by_key_on_a_table_of_a_few_rows(
    mariadb: str, namespace: str, statement: str
) -> None:
    sequences = stores_for(mariadb).queue.publish(namespace, "jobs", [b"m"] * 3)
    analyze(mariadb)
    params = {
        "sequences": json.dumps(sequences[1:]),
        "owner": "a",
        "lease_until": 1,
        "available_at": 1,
    }

    tables = tables_of(plan_of(mariadb, statement, params))

    assert [table["table_name"] for table in tables] == ["j", "q"], tables
    assert tables[1]["access_type"] == "eq_ref", tables
    assert tables[1]["key"] == "PRIMARY", tables


#: A lock on one message's row and nothing else (a primary-key lookup).
HOLD_ONE = (
    "SELECT sequence FROM later_delivery_queue FORCE INDEX (PRIMARY) WHERE sequence = %s FOR UPDATE"
)


def test_the_lease_writes_pass_a_row_another_session_holds(mariadb: str, namespace: str) -> None:
    """Another session holds the first message (a primary-key lock, nothing else);
    the owner's renew, hand-back, claim and ack of the others neither wait nor fail,
    on a table whose statistics count three rows. Unpinned, each read the table in
    full and waited for the held row until the lock wait timeout (1205)."""
    queue = stores_for(mariadb).queue
    held, *mine = queue.publish(namespace, "jobs", [b"h", b"1", b"2"])
    assert len(queue.claim(namespace, ["jobs"], "a", 60_000, batch_size=3)) == 3
    analyze(mariadb)
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic(using=mariadb):
            fetch(mariadb, HOLD_ONE, [held])
            locked.set()
            release.wait(30)

    holder, errors = in_thread(hold)
    try:
        assert locked.wait(10)
        with lock_wait_timeout(mariadb, 1):
            assert queue.renew("a", mine, 60_000) == mine
            assert queue.nack("a", mine) == 2
            claimed = queue.claim(namespace, ["jobs"], "a", 60_000, batch_size=2)
            assert [message.sequence for message in claimed] == mine
            assert queue.ack("a", mine) == 2
    finally:
        release.set()
        holder.join(30)
    assert errors == []
    assert queue.ack("a", [held]) == 1


# --- (b) two claimers never wait on each other ---


def test_a_claim_held_open_leaves_the_next_messages_to_another_claimer_at_once(
    mariadb: str, namespace: str
) -> None:
    """One claimer holds its claim's transaction open past the other's lock wait
    timeout: the other takes the next batch at once. Without ``SKIP LOCKED`` it would
    wait for the first batch's rows, then fail (1205)."""
    queue = stores_for(mariadb).queue
    published = queue.publish(namespace, "jobs", [b"m"] * 64)
    first: list[int] = []
    first_shard: list[int] = []
    claimed, release = threading.Event(), threading.Event()

    def hold_a_claim() -> None:
        first_shard.append(shard(mariadb))
        with transaction.atomic(using=mariadb):
            first.extend(m.sequence for m in queue.claim(namespace, ["jobs"], "a", 60_000))
            claimed.set()
            release.wait(30)

    holder, errors = in_thread(hold_a_claim)
    try:
        assert claimed.wait(10)
        own_shard(mariadb, set(first_shard))
        with lock_wait_timeout(mariadb, 1):
            second = [m.sequence for m in queue.claim(namespace, ["jobs"], "b", 60_000)]
            also = queue.claim(namespace, ["jobs", "other"], "b", 60_000)
    finally:
        release.set()
        holder.join(30)

    assert errors == []
    assert first == published[:16]
    assert second == published[16:32]
    assert [message.sequence for message in also] == published[32:48]


#: The claimers' wait of one queue's rows: a transaction of one of ``%s`` waiting for
#: another's lock (MariaDB's views; MySQL 8 has performance_schema.data_lock_waits).
WAITS = (
    "SELECT t.trx_mysql_thread_id, l.lock_table, t.trx_query "
    "FROM information_schema.INNODB_LOCK_WAITS AS w "
    "JOIN information_schema.INNODB_TRX AS t ON t.trx_id = w.requesting_trx_id "
    "JOIN information_schema.INNODB_LOCKS AS l ON l.lock_id = w.requested_lock_id "
    "WHERE t.trx_mysql_thread_id IN %s"
)


def test_two_claimers_looping_on_one_queue_never_wait_on_each_other(
    mariadb: str, namespace: str
) -> None:
    """Two sessions claim from one queue of 3,000 messages until it is empty, each
    holding each claim open a little (a worker's claim does more in its
    transaction), with a lock wait timeout of 1 s. A third session watches InnoDB's
    lock waits all along: it sees none of theirs, no claim fails, and every message
    goes to exactly one of them. Without ``SKIP LOCKED`` each claim waits for the
    other's rows (the watcher sees it)."""
    queue = stores_for(mariadb).queue
    published = queue.publish(namespace, "jobs", [b"m"] * 3_000)
    claimed: list[list[int]] = [[], []]
    shards: set[int] = set()
    ids: list[int] = []
    ready = threading.Barrier(3)
    done = threading.Event()
    choosing = threading.Lock()

    def claimer(number: int) -> Callable[[], None]:
        def run() -> None:
            with choosing:
                shards.add(own_shard(mariadb, shards))
                ids.append(thread_id(mariadb))
            ready.wait(30)
            with lock_wait_timeout(mariadb, 1):
                while True:
                    with transaction.atomic(using=mariadb):
                        batch = queue.claim(namespace, ["jobs"], f"c{number}", 600_000)
                        time.sleep(0.002)
                    if not batch:
                        return
                    claimed[number] += [message.sequence for message in batch]

        return run

    waits: list[tuple[Any, ...]] = []

    def watch() -> None:
        ready.wait(30)
        while not done.is_set():
            waits.extend(fetch(mariadb, WAITS, [tuple(ids)]))

    watcher, watch_errors = in_thread(watch)
    runs = [in_thread(claimer(number)) for number in range(2)]
    for thread, _ in runs:
        thread.join(120)
    done.set()
    watcher.join(30)

    errors = [error for _, run_errors in runs for error in run_errors] + watch_errors
    assert errors == []
    assert not any(isinstance(e, OperationalError) for e in errors)
    assert waits == []
    assert sorted(claimed[0] + claimed[1]) == published
    assert not set(claimed[0]) & set(claimed[1])
    assert claimed[0] and claimed[1], "both claimed"
    assert queue.ack("c0", claimed[0]) + queue.ack("c1", claimed[1]) == len(published)


# --- (c) publish: the sequences from the ids the inserts took ---


def queue_on_new_driver(alias: str) -> tuple[SqlDeliveryQueue, MysqlDriver]:
    """A queue store on a driver of its own (the cached driver keeps its answers)."""
    driver = MysqlDriver(alias)
    return SqlDeliveryQueue(driver), driver


def stored_sequences(alias: str, namespace: str) -> dict[bytes, int]:
    rows = fetch(
        alias,
        "SELECT payload, sequence FROM later_delivery_queue WHERE namespace = %s",
        [namespace],
    )
    return {bytes(payload): sequence for payload, sequence in rows}


def payloads(count: int) -> list[bytes]:
    return [f"p{number:04}".encode() for number in range(count)]


def inserts_of(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in queries.captured_queries if "INSERT INTO later_delivery_queue" in q["sql"]
    ]


def test_the_driver_asks_the_servers_lock_mode_and_step_once(mariadb: str) -> None:
    _, driver = queue_on_new_driver(mariadb)
    mode, step = fetch(mariadb, "SELECT @@innodb_autoinc_lock_mode, @@auto_increment_increment")[0]
    with CaptureQueriesContext(connections[mariadb]) as queries:
        assert driver.auto_increment() == (mode in (0, 1), step)
        assert driver.auto_increment() == (mode in (0, 1), step)
    assert len(queries.captured_queries) == 1


def test_a_batch_in_several_statements_returns_every_sequence_in_payload_order(
    mariadb: str, namespace: str
) -> None:
    queue, driver = queue_on_new_driver(mariadb)
    if not driver.auto_increment()[0]:
        pytest.skip("the server's ids are interleaved (innodb_autoinc_lock_mode = 2)")
    driver._packet_limit = 1_000  # 15 rows per statement
    sent = payloads(100)

    with CaptureQueriesContext(connections[mariadb]) as queries:
        sequences = queue.publish(namespace, "jobs", sent)

    assert len(inserts_of(queries)) >= 5
    stored = stored_sequences(mariadb, namespace)
    assert sequences == [stored[payload] for payload in sent]
    assert sequences == list(range(sequences[0], sequences[0] + 100))


def test_the_sequences_follow_the_servers_auto_increment_step(mariadb: str, namespace: str) -> None:
    """A server that spaces its ids (``auto_increment_increment``, as Galera sets it):
    a multi-row insert's rows took ``first``, ``first + step``..."""
    queue, driver = queue_on_new_driver(mariadb)
    fetch(mariadb, "SET SESSION auto_increment_increment = 3")
    try:
        if not driver.auto_increment()[0]:
            pytest.skip("the server's ids are interleaved (innodb_autoinc_lock_mode = 2)")
        sent = payloads(6)
        sequences = queue.publish(namespace, "jobs", sent)
    finally:
        fetch(mariadb, "SET SESSION auto_increment_increment = DEFAULT")

    stored = stored_sequences(mariadb, namespace)
    assert sequences == [stored[payload] for payload in sent]
    assert [b - a for a, b in pairwise(sequences)] == [3] * 5


def test_with_interleaved_ids_each_row_is_its_own_insert(mariadb: str, namespace: str) -> None:
    """Lock mode 2 (MySQL 8's default) promises a statement's ids unique and increasing,
    not consecutive: each row is then an INSERT of its own, all of a chunk sent at once,
    and each answers its id."""
    queue, driver = queue_on_new_driver(mariadb)
    driver._auto_increment = (False, 1)
    driver._packet_limit = 1_000
    sent = payloads(40)

    with CaptureQueriesContext(connections[mariadb]) as queries:
        sequences = queue.publish(namespace, "jobs", sent)

    stored = stored_sequences(mariadb, namespace)
    assert sequences == [stored[payload] for payload in sent]
    statements = inserts_of(queries)
    assert len(statements) >= 2
    assert sum(sql.count("INSERT INTO") for sql in statements) == 40
    # One row alone needs no id of its own: the plain insert.
    (single,) = queue.publish(namespace, "one", [b"single"])
    assert stored_sequences(mariadb, namespace)[b"single"] == single
