"""Conformance of ``KeyValuePort`` (``stores_for(alias).kv``) on SQLite, PostgreSQL and
MariaDB: ``expire``, ``get_many_for_update`` and ``range_members_many``, as their
docstrings state.

MariaDB runs here through this module's own ``db_alias`` (the shared one leaves it out
while the MySQL driver has statements for the kv store only)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import OperationalError, connections, transaction

from later_django.core.clock import now_ms
from later_django.storage.stores import stores_for
from later_django.storage.types import Delete, Increment, RangeAdd, RangeRemove, Set
from tests.storage import three_databases
from tests.storage.three_databases import key_column

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias


def stored(db_alias: str, key: str) -> tuple | None:
    """``(value, date_expire)`` of ``key`` as stored, expired or not."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            f"SELECT value, date_expire FROM later_storage WHERE {key_column(db_alias)} = %s", [key]
        )
        row = cursor.fetchone()
    if row is None:
        return None
    value, date_expire = row
    return (bytes(value) if value is not None else None, date_expire)


def row_count(db_alias: str, key: str) -> int:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM later_storage WHERE {key_column(db_alias)} = %s", [key]
        )
        return cursor.fetchone()[0]


# --- expire ---


def test_expire_sets_a_time_to_live_on_an_existing_value(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.set("k", b"v")
    assert stored(db_alias, "k") == (b"v", None)
    before = now_ms()
    kv.expire("k", 60)
    after = now_ms()
    value, date_expire = stored(db_alias, "k")
    assert value == b"v"
    assert before + 60_000 <= date_expire <= after + 60_000
    assert kv.get("k") == b"v"
    assert kv.exist("k") is True


def test_expire_with_a_ttl_of_zero_or_less_makes_the_value_expire_at_once(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.set("zero", b"a")
    kv.set("negative", b"b")
    kv.expire("zero", 0)
    kv.expire("negative", -5)
    assert kv.get("zero") is None
    assert kv.get("negative") is None
    assert kv.exist("zero") is False
    assert kv.get_many(["zero", "negative"]) == {}


def test_expire_of_an_absent_key_creates_nothing(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.expire("absent", 60)
    assert row_count(db_alias, "absent") == 0
    assert kv.get("absent") is None
    assert kv.exist("absent") is False


def test_expire_leaves_other_keys_alone(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.set("target", b"1")
    kv.set("bystander", b"2")
    kv.expire("target", 0)
    assert kv.get("target") is None
    assert stored(db_alias, "bystander") == (b"2", None)


def test_a_later_set_clears_an_expiry_set_by_expire(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.set("k", b"old")
    kv.expire("k", 60)
    kv.set("k", b"new")
    assert stored(db_alias, "k") == (b"new", None)


# --- get_many_for_update ---


def test_get_many_for_update_returns_what_get_many_returns(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.apply(
        [
            Set("b", b"vb"),
            Set("a", b"va"),
            Set("gone", b"x", ttl_seconds=-1),  # expired at once
            Increment("counter-only"),
        ]
    )
    keys = ["b", "a", "gone", "counter-only", "absent", "a"]
    with transaction.atomic(using=db_alias):
        locked = kv.get_many_for_update(keys)
    assert locked == {"a": b"va", "b": b"vb"}
    assert locked == kv.get_many(keys)
    with transaction.atomic(using=db_alias):
        assert kv.get_many_for_update([]) == {}
        assert kv.get_many_for_update(["absent"]) == {}


def _try_write_from_another_connection(db_alias: str, key: str) -> BaseException | None:
    """Updates ``key`` from a new connection that waits at most briefly for a lock;
    returns the error it met (``None`` when the write went through)."""
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            connection = connections[db_alias]
            with connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    cursor.execute("SET lock_timeout = '200ms'")
                elif connection.vendor == "mysql":
                    cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
                else:
                    cursor.execute("PRAGMA busy_timeout = 200")
                cursor.execute(
                    f"UPDATE later_storage SET value = %s WHERE {key_column(db_alias)} = %s",
                    [b"intruder", key],
                )
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(timeout=30)
    assert outcome, "the writing thread did not finish"
    return outcome[0]


def test_get_many_for_update_holds_the_rows_until_the_transaction_ends(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.set("locked", b"mine")
    with transaction.atomic(using=db_alias):
        assert kv.get_many_for_update(["locked"]) == {"locked": b"mine"}
        blocked = _try_write_from_another_connection(db_alias, "locked")
        assert isinstance(blocked, OperationalError), blocked
        assert kv.get("locked") == b"mine"
    # Once the transaction ended, the row can be written again.
    assert _try_write_from_another_connection(db_alias, "locked") is None
    assert kv.get("locked") == b"intruder"


def _lock_timeout_of_a_second(db_alias: str) -> None:
    with connections[db_alias].cursor() as cursor:
        if connections[db_alias].vendor == "mysql":
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        else:
            cursor.execute("SET lock_timeout = '1s'")


@pytest.mark.parametrize("call", ["get_many_for_update", "delete", "decrement", "clear_ranges"])
def test_a_keyed_lock_does_not_wait_on_another_keys_row_in_an_open_transaction(
    db_alias: str, call: str
) -> None:
    """In a table of a few rows (where MariaDB read a list's rows by scanning the
    table, locking what it read: decision 263), a locking read, delete, decrement or
    range clear of some keys neither waits for another transaction that wrote other
    keys and is still open (1 s lock timeout) nor touches that transaction's rows."""
    if connections[db_alias].vendor == "sqlite":
        pytest.skip("SQLite serialises write transactions: every writer waits for the open one")
    kv = stores_for(db_alias).kv
    kv.apply([Set("a", b"va"), Increment("c-a", 2), RangeAdd("r-a", b"m")])
    wrote, finish = threading.Event(), threading.Event()

    def write_others() -> None:
        with transaction.atomic(using=db_alias):
            stores_for(db_alias).kv.apply(
                [Set("b", b"vb"), Increment("c-b", 2), RangeAdd("r-b", b"m")]
            )
            wrote.set()
            finish.wait(10)

    def lock_mine() -> object:
        _lock_timeout_of_a_second(db_alias)
        mine = stores_for(db_alias).kv
        with transaction.atomic(using=db_alias):
            if call == "get_many_for_update":
                return mine.get_many_for_update(["a"])
            if call == "delete":
                mine.apply([Delete("a"), Delete("c-a")])
                return None
            if call == "decrement":
                return mine.decrement_counters({"c-a": 1})
            return mine.decrement_counters({}, clear_ranges=["r-a"])

    outcomes: dict[str, list] = {"others": [], "mine": []}

    def run(name: str, body: Callable[[], object]) -> threading.Thread:
        def target() -> None:
            try:
                outcomes[name].append(body())
            except BaseException as error:
                outcomes[name].append(error)
            finally:
                connections[db_alias].close()

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    others = run("others", write_others)
    try:
        assert wrote.wait(10)
        mine = run("mine", lock_mine)
        mine.join(10)
        expected = {
            "get_many_for_update": {"a": b"va"},
            "delete": None,
            "decrement": {"c-a": 1},
            "clear_ranges": {},
        }
        assert outcomes["mine"] == [expected[call]]
    finally:
        finish.set()
        others.join(10)
    assert outcomes["others"] == [None]
    assert kv.get_many(["b"]) == {"b": b"vb"}
    assert kv.range_members_many(["r-b"]) == {"r-b": [b"m"]}


# --- range_members_many ---


def test_range_members_many_returns_live_members_oldest_first_per_range(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.apply(
        [
            # Added out of byte order: the answer follows the cursor, not the value.
            RangeAdd("r1", b"z"),
            RangeAdd("r1", b"a"),
            RangeAdd("r1", b"m"),
            RangeAdd("r2", b"live"),
            RangeAdd("r2", b"dead", ttl_seconds=-1),
            RangeAdd("r3", b"dead", ttl_seconds=-1),
            RangeAdd("r4", b"removed"),
            RangeAdd("other", b"not-asked"),
        ]
    )
    kv.apply([RangeRemove("r4", b"removed")])
    members = kv.range_members_many(["r1", "r2", "r3", "r4", "absent", "r1"])
    assert members == {"r1": [b"z", b"a", b"m"], "r2": [b"live"]}
    assert kv.range_members_many([]) == {}
    assert kv.range_members_many(["r3", "absent"]) == {}


def test_range_members_many_keeps_a_re_added_member_at_its_cursor(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.apply([RangeAdd("r", b"first"), RangeAdd("r", b"second"), RangeAdd("r", b"first")])
    assert kv.range_members_many(["r"]) == {"r": [b"first", b"second"]}


# --- decrement_counters ---


def test_decrement_counters_returns_what_each_decrement_left(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.apply([Increment("three", 3), Increment("one", 1), Set("valued", b"v")])
    assert kv.decrement_counters({"three": 1, "one": 1, "valued": 1, "absent": 1}) == {
        "three": 2,
        "one": 0,
    }
    assert kv.decrement_counters({"three": 2}) == {"three": 0}
    # Nothing was created, and a value-only row was left alone.
    assert row_count(db_alias, "absent") == 0
    assert stored(db_alias, "valued") == (b"v", None)
    assert kv.decrement_counters({}) == {}


def test_decrement_counters_empties_the_ranges_it_is_given(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.apply(
        [
            Increment("count", 2),
            RangeAdd("cleared", b"a"),
            RangeAdd("cleared", b"b"),
            RangeAdd("kept", b"c"),
        ]
    )
    with transaction.atomic(using=db_alias):
        left = kv.decrement_counters({"count": 1}, clear_ranges=["cleared", "absent"])
    assert left == {"count": 1}
    assert kv.range_members_many(["cleared", "kept"]) == {"kept": [b"c"]}


def test_concurrent_decrements_of_one_counter_each_see_their_own_result(db_alias: str) -> None:
    """Of concurrent callers exactly one brings the counter to 0 (SQLite serialises
    writers; PostgreSQL and MariaDB lock the row until each transaction commits)."""
    kv = stores_for(db_alias).kv
    callers = 6
    kv.apply([Increment("fan", callers)])
    seen: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def decrement() -> None:
        try:
            with transaction.atomic(using=db_alias):
                left = stores_for(db_alias).kv.decrement_counters({"fan": 1})
            with lock:
                seen.append(left["fan"])
        except BaseException as error:
            errors.append(error)
        finally:
            connections[db_alias].close()

    threads = [threading.Thread(target=decrement) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(seen) == list(range(callers))
