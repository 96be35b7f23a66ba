"""Conformance of ``LeasePort.ensure`` and ``LeasePort.hold`` on SQLite, PostgreSQL and
MariaDB.

Both are for lease tables with one slot column: the consumer-group leases of a retained
log (``stores_for(alias).log.leases``, scope ``(namespace, group, topic)``, slot: the
partition)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connections, transaction

from later_django.storage.leases import Lease, LeaseStore
from later_django.storage.queries.leases import PASS_LEASES
from later_django.storage.stores import stores_for
from tests.storage import three_databases
from tests.threads import in_thread

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

SCOPE = ("ns", "g", "events")
OTHER_SCOPE = ("ns", "h", "events")
T = 1_000_000


def state(db_alias: str, scope: tuple = SCOPE) -> dict[int, tuple]:
    """partition -> (owner, until, epoch) of every lease row of ``scope``."""
    leases = stores_for(db_alias).log.leases.leases(scope)
    return {slot[0]: (lease.owner, lease.until_ms, lease.epoch) for slot, lease in leases.items()}


# --- ensure ---


def test_ensure_creates_free_rows_at_epoch_zero(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    assert leases.leases(SCOPE) == {}
    leases.ensure(SCOPE, [2, 0, 1])
    assert leases.leases(SCOPE) == {(p,): Lease((p,), None, 0, 0) for p in range(3)}
    assert leases.leases(OTHER_SCOPE) == {}


def test_ensure_leaves_existing_rows_as_they_are(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1])
    assert leases.take(SCOPE, "m", [(0,)], until_ms=T + 500, now_ms=T) == {(0,): 1}
    leases.release(SCOPE, "m", [(0,)])
    assert leases.take(SCOPE, "n", [(0,)], until_ms=T + 700, now_ms=T) == {(0,): 2}
    leases.ensure(SCOPE, [0, 1, 2, 1])
    assert state(db_alias) == {0: ("n", T + 700, 2), 1: (None, 0, 0), 2: (None, 0, 0)}
    leases.ensure(SCOPE, [])
    assert len(state(db_alias)) == 3


# --- hold ---


def test_hold_takes_free_rows_and_returns_the_epochs_held(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1, 2, 3])
    assert leases.hold(SCOPE, "a", [0, 1], until_ms=T + 100, now_ms=T) == {0: 1, 1: 1}
    assert state(db_alias) == {
        0: ("a", T + 100, 1),
        1: ("a", T + 100, 1),
        2: (None, 0, 0),
        3: (None, 0, 0),
    }


def test_hold_leaves_another_owners_live_lease_alone(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1, 2])
    leases.hold(SCOPE, "a", [0, 1], until_ms=T + 100, now_ms=T)
    assert leases.hold(SCOPE, "b", [1, 2], until_ms=T + 300, now_ms=T + 50) == {2: 1}
    assert state(db_alias) == {
        0: ("a", T + 100, 1),
        1: ("a", T + 100, 1),
        2: ("b", T + 300, 1),
    }


def test_hold_renews_own_leases_keeping_the_epoch_and_releases_the_rest(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1, 2])
    leases.hold(SCOPE, "a", [0, 1, 2], until_ms=T + 100, now_ms=T)
    assert leases.hold(SCOPE, "a", [0], until_ms=T + 900, now_ms=T + 50) == {0: 1}
    # Released rows keep their epoch; the next taker raises it.
    assert state(db_alias) == {0: ("a", T + 900, 1), 1: (None, 0, 1), 2: (None, 0, 1)}
    assert leases.hold(SCOPE, "b", [1, 2], until_ms=T + 400, now_ms=T + 60) == {1: 2, 2: 2}
    assert state(db_alias) == {0: ("a", T + 900, 1), 1: ("b", T + 400, 2), 2: ("b", T + 400, 2)}


def test_hold_takes_a_lapsed_lease_with_the_next_epoch(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0])
    leases.hold(SCOPE, "a", [0], until_ms=T + 100, now_ms=T)
    assert leases.hold(SCOPE, "b", [0], until_ms=T + 500, now_ms=T + 50) == {}, "not lapsed yet"
    assert leases.hold(SCOPE, "b", [0], until_ms=T + 500, now_ms=T + 101) == {0: 2}
    assert state(db_alias) == {0: ("b", T + 500, 2)}
    # The former owner holds nothing now, and its hold changes nothing.
    assert leases.hold(SCOPE, "a", [0], until_ms=T + 999, now_ms=T + 102) == {}
    assert state(db_alias) == {0: ("b", T + 500, 2)}


def test_hold_of_nothing_releases_everything_the_owner_held(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1])
    leases.ensure(OTHER_SCOPE, [0])
    leases.hold(SCOPE, "a", [0, 1], until_ms=T + 100, now_ms=T)
    leases.hold(OTHER_SCOPE, "a", [0], until_ms=T + 100, now_ms=T)
    assert leases.hold(SCOPE, "a", [], until_ms=T + 200, now_ms=T + 10) == {}
    assert state(db_alias) == {0: (None, 0, 1), 1: (None, 0, 1)}
    assert state(db_alias, OTHER_SCOPE) == {0: ("a", T + 100, 1)}, "another scope is untouched"


# --- take, renew and release, on every lease table ---

#: (scope, two slots, two owners) of each lease table, and how to reach its store.
TABLES = {
    "partition": (("ns",), [("events", 0), ("events", 1)], ["a", "b"]),
    "consumer": (SCOPE, [(0,), (1,)], ["a", "b"]),
    "pass": ((), [("ns-pass-sweep",), ("ns-pass-trim",)], [b"a", b"b"]),
}


def lease_store(db_alias: str, table: str) -> LeaseStore:
    stores = stores_for(db_alias)
    if table == "partition":
        return stores.partitions.leases
    if table == "consumer":
        return stores.log.leases
    return LeaseStore(stores.driver, PASS_LEASES)


def held(store: LeaseStore, scope: tuple, slot: tuple) -> tuple | None:
    """(owner, until, epoch) of ``slot``, None when it has no row."""
    lease = store.leases(scope).get(slot)
    if lease is None:
        return None
    owner = bytes(lease.owner) if isinstance(lease.owner, memoryview) else lease.owner
    return (owner, lease.until_ms, lease.epoch)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_take_answers_exactly_whether_it_won_and_at_which_epoch(db_alias: str, table: str) -> None:
    store = lease_store(db_alias, table)
    scope, (slot, _), (a, b) = TABLES[table]
    assert store.take(scope, a, [slot], until_ms=T + 100, now_ms=T) == {slot: 1}, "absent"
    assert held(store, scope, slot) == (a, T + 100, 1)
    assert store.take(scope, b, [slot], until_ms=T + 200, now_ms=T + 50) == {}, "live: another's"
    assert store.take(scope, a, [slot], until_ms=T + 300, now_ms=T + 50) == {}, "live: its own"
    assert held(store, scope, slot) == (a, T + 100, 1), "a refused take changes nothing"
    assert store.take(scope, a, [slot], until_ms=T + 300, now_ms=T + 60, renew_own=True) == {
        slot: 1
    }, "renew_own extends its own lease, epoch kept"
    assert held(store, scope, slot) == (a, T + 300, 1)
    assert store.take(scope, b, [slot], until_ms=T + 900, now_ms=T + 301) == {slot: 2}, "lapsed"
    assert held(store, scope, slot) == (b, T + 900, 2)
    assert store.take(scope, b, [slot], until_ms=T + 1000, now_ms=T + 901) == {slot: 2}, (
        "its own lapsed lease: the epoch is kept, as no one else held it"
    )
    store.release(scope, b, [slot], now_ms=T + 910)
    assert held(store, scope, slot) == (None, 0, 2)
    assert store.take(scope, b, [slot], until_ms=T + 1100, now_ms=T + 920) == {slot: 3}, (
        "released: the next taker raises the epoch, even the former holder"
    )


@pytest.mark.parametrize("table", sorted(TABLES))
def test_take_of_several_slots_returns_only_those_won(db_alias: str, table: str) -> None:
    store = lease_store(db_alias, table)
    scope, (first, second), (a, b) = TABLES[table]
    store.take(scope, a, [second], until_ms=T + 100, now_ms=T)
    assert store.take(scope, b, [second, first], until_ms=T + 200, now_ms=T + 10) == {first: 1}
    assert held(store, scope, first) == (b, T + 200, 1)
    assert held(store, scope, second) == (a, T + 100, 1)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_renew_returns_exactly_the_slots_still_held_at_their_epoch(
    db_alias: str, table: str
) -> None:
    store = lease_store(db_alias, table)
    scope, (first, second), (a, b) = TABLES[table]
    assert store.take(scope, a, [first, second], until_ms=T + 100, now_ms=T) == {
        first: 1,
        second: 1,
    }
    # ``second`` lapses and ``b`` takes it (epoch 2).
    assert store.take(scope, b, [second], until_ms=T + 500, now_ms=T + 101) == {second: 2}
    assert store.renew(scope, a, {first: 1, second: 1}, until_ms=T + 700, now_ms=T + 102) == {first}
    assert held(store, scope, first) == (a, T + 700, 1)
    assert held(store, scope, second) == (b, T + 500, 2), "another's lease is not extended"
    # A stale epoch of its own slot (released, taken back at epoch 2) is no fence.
    store.release(scope, a, [first], now_ms=T + 103)
    assert store.take(scope, a, [first], until_ms=T + 800, now_ms=T + 104) == {first: 2}
    assert store.renew(scope, a, {first: 1}, until_ms=T + 999, now_ms=T + 105) == set()
    assert held(store, scope, first) == (a, T + 800, 2)
    assert store.renew(scope, a, {first: 2}, until_ms=T + 999, now_ms=T + 106) == {first}
    assert held(store, scope, first) == (a, T + 999, 2)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_release_gives_back_only_the_owners_leases(db_alias: str, table: str) -> None:
    store = lease_store(db_alias, table)
    scope, (first, second), (a, b) = TABLES[table]
    store.take(scope, a, [first], until_ms=T + 100, now_ms=T)
    store.take(scope, b, [second], until_ms=T + 100, now_ms=T)
    store.release(scope, a, [first, second], now_ms=T + 1)
    assert held(store, scope, first) == (None, 0, 1)
    assert held(store, scope, second) == (b, T + 100, 1), "another owner's lease stays"
    store.release(scope, b, None, now_ms=T + 2)
    assert held(store, scope, second) == (None, 0, 1)


# --- two sessions racing for one slot ---


@pytest.mark.parametrize("table", sorted(TABLES))
def test_of_two_sessions_taking_one_slot_exactly_one_wins_with_the_next_epoch(
    db_alias: str, table: str
) -> None:
    """Each round two connections take the same slot at once, each in its own
    transaction (held open a moment after the take): absent in the first round,
    released by the last winner in the others. Exactly one gets the slot, at the
    epoch after the last one, and the row says it is that one's."""
    scope, (slot, _), (a, b) = TABLES[table]
    rounds = 4
    step = threading.Barrier(2, timeout=30)
    won: dict[int, dict[Any, dict]] = {at: {} for at in range(rounds)}
    errors: list[BaseException] = []

    def take(owner: Any) -> None:
        try:
            store = lease_store(db_alias, table)
            for at in range(rounds):
                now = T + 10 * at
                step.wait()
                with transaction.atomic(using=db_alias):
                    taken = store.take(scope, owner, [slot], until_ms=T + 10**6, now_ms=now)
                    won[at][owner] = taken
                    time.sleep(0.05)
                step.wait()
                if won[at][owner]:
                    store.release(scope, owner, [slot], now_ms=now + 1)
        except BaseException as error:
            errors.append(error)
            step.abort()
        finally:
            connections[db_alias].close()

    threads = [threading.Thread(target=take, args=(owner,)) for owner in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    for at in range(rounds):
        winners = {owner: got for owner, got in won[at].items() if got}
        assert len(winners) == 1, (at, won[at])
        assert list(winners.values()) == [{slot: at + 1}], (at, won[at])
    assert held(lease_store(db_alias, table), scope, slot) == (None, 0, rounds)


# --- statements beside another owner's transaction in flight ---


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize("call", ["take", "renew", "release", "release_all"])
def test_a_lease_call_does_not_wait_on_another_slot_held_in_an_open_transaction(
    db_alias: str, table: str, call: str
) -> None:
    """``b`` took the second slot in a transaction still open; ``a``'s take, renew or
    release of the first slot (or of all its own) locks only that slot's row: it
    neither waits for ``b``'s transaction (1 s lock timeout) nor changes the second
    slot."""
    if connections[db_alias].vendor == "sqlite":
        pytest.skip("SQLite serialises write transactions: every writer waits for the open one")
    scope, (first, second), (a, b) = TABLES[table]
    store = lease_store(db_alias, table)
    assert store.take(scope, a, [first], until_ms=T + 100, now_ms=T) == {first: 1}
    took, finish = threading.Event(), threading.Event()

    def hold_second() -> None:
        with transaction.atomic(using=db_alias):
            lease_store(db_alias, table).take(scope, b, [second], until_ms=T + 100, now_ms=T)
            took.set()
            finish.wait(10)

    def call_first() -> object:
        with connections[db_alias].cursor() as cursor:
            if connections[db_alias].vendor == "mysql":
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            else:
                cursor.execute("SET lock_timeout = '1s'")
        mine = lease_store(db_alias, table)
        if call == "take":
            return mine.take(scope, a, [first], until_ms=T + 200, now_ms=T + 10, renew_own=True)
        if call == "renew":
            return mine.renew(scope, a, {first: 1}, until_ms=T + 200, now_ms=T + 10)
        if call == "release":
            return mine.release(scope, a, [first], now_ms=T + 10)
        return mine.release(scope, a, None, now_ms=T + 10)

    holder, held_outcome = in_thread(db_alias, hold_second)
    try:
        assert took.wait(10)
        caller, outcome = in_thread(db_alias, call_first)
        caller.join(10)
        expected = {"take": {first: 1}, "renew": {first}, "release": None, "release_all": None}
        assert outcome == [expected[call]]
    finally:
        finish.set()
        holder.join(10)
    assert held_outcome == [None]
    assert held(store, scope, second) == (b, T + 100, 1)


def test_hold_does_not_wait_on_another_owners_slot_held_in_an_open_transaction(
    db_alias: str,
) -> None:
    """``b`` took partition 1 in a transaction still open; ``a``'s hold of partition 0
    (the other rows of the scope read, not wanted) neither waits for it (1 s lock
    timeout) nor changes partition 1."""
    if connections[db_alias].vendor == "sqlite":
        pytest.skip("SQLite serialises write transactions: every writer waits for the open one")
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1, 2])
    took, finish = threading.Event(), threading.Event()

    def hold_one() -> None:
        with transaction.atomic(using=db_alias):
            stores_for(db_alias).log.leases.hold(SCOPE, "b", [1], until_ms=T + 100, now_ms=T)
            took.set()
            finish.wait(10)

    def hold_zero() -> object:
        with connections[db_alias].cursor() as cursor:
            if connections[db_alias].vendor == "mysql":
                cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
            else:
                cursor.execute("SET lock_timeout = '1s'")
        mine = stores_for(db_alias).log.leases
        return mine.hold(SCOPE, "a", [0], until_ms=T + 100, now_ms=T)

    holder, held_outcome = in_thread(db_alias, hold_one)
    try:
        assert took.wait(10)
        caller, outcome = in_thread(db_alias, hold_zero)
        caller.join(10)
        assert outcome == [{0: 1}]
    finally:
        finish.set()
        holder.join(10)
    assert held_outcome == [None]
    assert state(db_alias) == {0: ("a", T + 100, 1), 1: ("b", T + 100, 1), 2: (None, 0, 0)}
