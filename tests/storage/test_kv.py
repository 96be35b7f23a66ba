"""Values and ranges (``KeyValueStore``) on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connections, transaction
from django.test.utils import CaptureQueriesContext

from later_django.core.clock import now_ms
from later_django.storage.kv import KeyValueStore
from later_django.storage.stores import stores_for
from later_django.storage.types import (
    Delete,
    Expire,
    Increment,
    RangeAdd,
    RangeClear,
    RangeExpire,
    RangeOrder,
    RangeRemove,
    Set,
)
from tests.storage import three_databases
from tests.storage.three_databases import key_column
from tests.threads import at_once

#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias


#: An operation that passes validation but fails in the database, after the
#: operations before it were written: the counter leaves the 64-bit range.
OVERFLOWING_INCREMENT = Increment("counter", 2**63)
#: SQLite's driver refuses the number; PostgreSQL reports "bigint out of range".
DATABASE_FAILURE = (DatabaseError, OverflowError)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def expire_value_now(db_alias: str, key: str) -> None:
    """Moves the expiry of ``key`` into the past, as if its TTL had run out."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            f"UPDATE later_storage SET date_expire = %s WHERE {key_column(db_alias)} = %s",
            [now_ms() - 1_000, key],
        )


def expire_member_now(db_alias: str, range_key: str, value: bytes) -> None:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "UPDATE later_storage_range SET date_expire = %s WHERE range_key = %s AND value = %s",
            [now_ms() - 1_000, range_key, value],
        )


def stored_row(db_alias: str, key: str) -> tuple | None:
    """``(value, counter_value, date_expire)`` of ``key`` as stored, expired or not."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT value, counter_value, date_expire FROM later_storage "
            f"WHERE {key_column(db_alias)} = %s",
            [key],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    value, counter, date_expire = row
    return (bytes(value) if value is not None else None, counter, date_expire)


def member_cursors(store: KeyValueStore, key: str) -> dict[bytes, int]:
    page = store.range_page(key, limit=1_000)
    return {item.value: item.cursor for item in page.items}


def walk(store: KeyValueStore, key: str, order: RangeOrder, limit: int) -> list[list[bytes]]:
    pages, cursor = [], None
    while True:
        page = store.range_page(key, cursor=cursor, limit=limit, order=order)
        pages.append([item.value for item in page.items])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


# --- values ---


def test_get_of_an_absent_key_is_none(db_alias: str) -> None:
    assert stores_for(db_alias).kv.get("missing") is None


def test_set_then_get_returns_the_bytes(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("k", b"\x00binary\xff")])
    assert store.get("k") == b"\x00binary\xff"


def test_set_replaces_the_value_and_clears_a_previous_expiry(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("k", b"one", ttl_seconds=60)])
    assert stored_row(db_alias, "k")[2] is not None
    store.apply([Set("k", b"two")])
    assert store.get("k") == b"two"
    assert stored_row(db_alias, "k")[2] is None


def test_set_with_ttl_expires_the_value_at_now_plus_ttl(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    before = now_ms()
    store.apply([Set("k", b"v", ttl_seconds=30)])
    date_expire = stored_row(db_alias, "k")[2]
    assert before + 30_000 <= date_expire <= now_ms() + 30_000


def test_set_records_date_updated_only_when_it_replaces_a_value(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("k", b"one")])
    select = (
        f"SELECT date_created, date_updated FROM later_storage WHERE {key_column(db_alias)} = %s"
    )
    with connections[db_alias].cursor() as cursor:
        cursor.execute(select, ["k"])
        assert cursor.fetchone()[1] is None
        store.apply([Set("k", b"two")])
        cursor.execute(select, ["k"])
        date_created, date_updated = cursor.fetchone()
    assert date_updated is not None and date_updated >= date_created


def test_delete_removes_a_key_and_deleting_an_absent_key_succeeds(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("k", b"v")])
    store.apply([Delete("k"), Delete("never-there")])
    assert store.get("k") is None
    assert stored_row(db_alias, "k") is None


def test_expire_sets_a_ttl_on_an_existing_key(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("k", b"v")])
    store.apply([Expire("k", 60)])
    assert store.get("k") == b"v"
    assert stored_row(db_alias, "k")[2] > now_ms()


def test_expire_with_zero_ttl_makes_the_value_absent_at_once(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("k", b"v")])
    store.apply([Expire("k", 0)])
    assert store.get("k") is None


def test_expire_of_an_absent_key_does_not_create_it(db_alias: str) -> None:
    stores_for(db_alias).kv.apply([Expire("ghost", 60)])
    assert stored_row(db_alias, "ghost") is None


def test_expired_value_reads_as_absent_in_get_and_get_many(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("old", b"1"), Set("live", b"2")])
    expire_value_now(db_alias, "old")
    assert store.get("old") is None
    assert store.get_many(["old", "live"]) == {"live": b"2"}


def unindexed_expiry(db_alias: str, key: str) -> tuple[int | None, int | None]:
    """``(date_expire, date_expire_unindexed)`` of ``key`` as stored."""
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT date_expire, date_expire_unindexed FROM later_storage "
            f"WHERE {key_column(db_alias)} = %s",
            [key],
        )
        return cursor.fetchone()


def test_a_set_swept_with_the_job_index_keeps_its_expiry_unindexed_and_reads_absent_after_it(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    before = now_ms()
    store.apply([Set("rec", b"v", 30, swept_with_job_index=True), Set("plain", b"p", 30)])
    indexed, unindexed = unindexed_expiry(db_alias, "rec")
    assert indexed is None and before + 30_000 <= unindexed <= now_ms() + 30_000
    assert unindexed_expiry(db_alias, "plain")[1] is None
    assert store.get("rec") == b"v"

    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "UPDATE later_storage SET date_expire_unindexed = %s "
            f"WHERE {key_column(db_alias)} = 'rec'",
            [now_ms() - 1],
        )
    assert store.get("rec") is None
    assert store.get_many(["rec", "plain"]) == {"plain": b"p"}
    # An expired row counts as absent for the conditional writes too.
    assert store.set_if_absent("rec", b"new")
    assert store.get("rec") == b"new"
    assert unindexed_expiry(db_alias, "rec") == (None, None)


def test_a_set_swept_with_the_job_index_is_a_hot_update_on_postgres(postgres_alias: str) -> None:
    """The finish of a job rewrites its record with an expiry: with the expiry in the
    unindexed column no index of ``later_storage`` changes, so PostgreSQL updates the
    row in place (HOT) and leaves nothing for VACUUM; in ``date_expire`` (held by the
    sweep's partial index) it could not. Counted in the transaction's own statistics."""
    store = stores_for(postgres_alias).kv
    hot = "SELECT pg_stat_get_xact_tuples_hot_updated('later_storage'::regclass)"
    updated = "SELECT pg_stat_get_xact_tuples_updated('later_storage'::regclass)"

    def counts(cursor) -> tuple[int, int]:
        cursor.execute(updated)
        (upd,) = cursor.fetchone()
        cursor.execute(hot)
        return upd, cursor.fetchone()[0]

    with transaction.atomic(using=postgres_alias), connections[postgres_alias].cursor() as cursor:
        store.apply([Set("finishing", b"running"), Set("plain", b"running")])
        start = counts(cursor)
        store.apply([Set("finishing", b"success", 60, swept_with_job_index=True)])
        after_unindexed = counts(cursor)
        store.apply([Set("plain", b"success", 60)])
        after_indexed = counts(cursor)
    assert after_unindexed == (start[0] + 1, start[1] + 1), "the unindexed expiry: HOT"
    assert after_indexed == (after_unindexed[0] + 1, after_unindexed[1]), "date_expire: not HOT"


def test_get_many_returns_present_keys_and_leaves_out_absent_ones(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("a", b"1"), Set("b", b"2"), Set("c", b"3")])
    assert store.get_many(["a", "c", "missing"]) == {"a": b"1", "c": b"3"}
    assert store.get_many([]) == {}


def test_get_many_handles_keys_with_quotes_and_unicode(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    keys = ['quote"d', "it's", "ünïcødé", "back\\slash"]
    store.apply([Set(key, key.encode()) for key in keys])
    assert store.get_many(keys) == {key: key.encode() for key in keys}


def test_increment_creates_a_never_expiring_counter_and_adds_to_it(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Increment("hits")])
    store.apply([Increment("hits", 4), Increment("hits", -2)])
    value, counter, date_expire = stored_row(db_alias, "hits")
    assert (value, counter, date_expire) == (None, 3, None)
    assert store.get("hits") is None


def test_increment_of_an_expired_key_starts_the_counter_again(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Increment("hits", 5), Expire("hits", 60)])
    expire_value_now(db_alias, "hits")
    store.apply([Increment("hits", 2)])
    assert stored_row(db_alias, "hits") == (None, 2, None)


def test_counter_scan_reads_the_live_counters_between_two_bounds_in_key_order(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    store.apply(
        [
            Increment("c-b", 2),
            Increment("c-a", 5),
            Increment("c-old", 1),
            Expire("c-old", 60),
            Set("c-plain", b"x"),
            Increment("d-beyond", 9),
        ]
    )
    expire_value_now(db_alias, "c-old")
    assert store.counter_scan("c-", "c.", 10) == [("c-a", 5), ("c-b", 2)]
    assert store.counter_scan("c-", "c.", 1) == [("c-a", 5)]
    with pytest.raises(ValueError, match="positive integer"):
        store.counter_scan("c-", "c.", 0)


def test_read_ranges_decrementing_reads_empties_and_counts_down_the_marked_members(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    store.apply(
        [
            RangeAdd("p1-next", b"plain"),
            RangeAdd("p1-next", b"&c1"),
            RangeAdd("p2-next", b"&c1"),
            RangeAdd("p2-next", b"&c2"),
            RangeAdd("p3-next", b"&gone"),
            RangeAdd("other-next", b"&c1"),
            Increment("c-c1-pending", 3),
            Increment("c-c2-pending", 1),
        ]
    )
    with transaction.atomic(using=db_alias):
        ranges, left = store.read_ranges_decrementing(
            ["p1-next", "p2-next", "p3-next", "empty-next"], b"&", "c-", "-pending"
        )
    assert ranges == {
        "p1-next": [b"plain", b"&c1"],
        "p2-next": [b"&c1", b"&c2"],
        "p3-next": [b"&gone"],
    }
    assert left == {"c-c1-pending": 1, "c-c2-pending": 0}, "an absent counter is left out"
    assert store.range_members_many(["p1-next", "p2-next", "p3-next", "other-next"]) == {
        "other-next": [b"&c1"]
    }
    assert stored_row(db_alias, "c-gone-pending") is None, "not created"
    with transaction.atomic(using=db_alias):
        assert store.read_ranges_decrementing(["p1-next"], b"&", "c-", "-pending") == ({}, {})


def test_key_scan_reverse_walks_the_live_keys_between_two_bounds_largest_first(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    store.apply(
        [
            Set("k-a", b"1"),
            Set("k-c", b"3"),
            Set("k-b", b"2"),
            Increment("k-counter"),
            Set("k-old", b"x"),
            Expire("k-old", 60),
            Set("k.beyond", b"9"),
            Set("j-before", b"0"),
        ]
    )
    expire_value_now(db_alias, "k-old")
    assert store.key_scan_reverse("k-", "k.", 10) == ["k-counter", "k-c", "k-b", "k-a"]
    assert store.key_scan_reverse("k-", "k.", 2) == ["k-counter", "k-c"]
    # The next page stops below the last key read (``stop`` is exclusive).
    assert store.key_scan_reverse("k-", "k-c", 10) == ["k-b", "k-a"]
    assert store.key_scan_reverse("k-", "k.", 10) == list(reversed(store.key_scan("k-", "k.", 10)))
    with pytest.raises(ValueError, match="positive integer"):
        store.key_scan_reverse("k-", "k.", 0)


def test_get_many_unswept_also_returns_expired_values_until_they_are_deleted(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("live", b"1"), Set("old", b"2", 60), Set("gone", b"3"), Increment("hits")])
    expire_value_now(db_alias, "old")
    store.apply([Delete("gone")])
    keys = ["live", "old", "gone", "hits", "never"]

    assert store.get_many(keys) == {"live": b"1"}
    assert store.get_many_unswept(keys) == {"live": b"1", "old": b"2"}


def test_a_run_of_increments_is_one_statement_with_the_effect_of_each(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Increment("old", 5), Expire("old", 60), Increment("kept", 7)])
    expire_value_now(db_alias, "old")
    run = [Increment("new", 2), Increment("kept", 1), Increment("old", 3), Increment("new", 1)]
    with CaptureQueriesContext(connections[db_alias]) as captured:
        store.apply(run, savepoint=False)
    statements = [query["sql"] for query in captured.captured_queries]
    assert len([sql for sql in statements if "INSERT INTO later_storage" in sql]) == 1
    assert stored_row(db_alias, "new") == (None, 3, None)
    assert stored_row(db_alias, "kept") == (None, 8, None)
    assert stored_row(db_alias, "old") == (None, 3, None), "an expired counter starts again"


# --- apply is all-or-nothing ---


def test_apply_leaves_nothing_behind_when_a_later_operation_fails(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("kept", b"before")])
    with pytest.raises(DATABASE_FAILURE):
        # A range member may not be NULL: the database refuses the third operation.
        store.apply([Set("new", b"v"), Set("kept", b"after"), OVERFLOWING_INCREMENT])
    assert store.get("new") is None
    assert store.get("kept") == b"before"
    assert store.range_count("r") == 0


def test_apply_rejects_an_object_that_is_not_an_operation_and_writes_nothing(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    with pytest.raises(TypeError, match="not a storage operation"):
        store.apply([Set("new", b"v"), ("Set", "other", b"v")])
    assert store.get("new") is None


def test_apply_inside_an_outer_transaction_rolls_back_only_its_own_batch(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    with transaction.atomic(using=db_alias):
        store.apply([Set("outer", b"1")])
        with pytest.raises(DATABASE_FAILURE):
            store.apply([Set("inner", b"2"), OVERFLOWING_INCREMENT])
        store.apply([Set("after", b"3")])
    assert store.get("outer") == b"1"
    assert store.get("inner") is None
    assert store.get("after") == b"3"


def test_apply_inside_an_outer_transaction_rolls_back_with_it(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    with pytest.raises(RuntimeError), transaction.atomic(using=db_alias):
        store.apply([Set("k", b"v"), RangeAdd("r", b"m")])
        raise RuntimeError("the caller's own work failed")
    assert store.get("k") is None
    assert store.range_count("r") == 0


def test_apply_of_an_empty_batch_does_nothing(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([])
    assert store.get_many(["anything"]) == {}


# --- set_if_absent ---


def test_set_if_absent_creates_once_and_leaves_a_live_value_untouched(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    assert store.set_if_absent("k", b"first") is True
    assert store.set_if_absent("k", b"second") is False
    assert store.get("k") == b"first"


def test_set_if_absent_replaces_an_expired_value(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("k", b"stale", ttl_seconds=60), Increment("k", 3)])
    expire_value_now(db_alias, "k")
    assert store.set_if_absent("k", b"fresh") is True
    assert stored_row(db_alias, "k") == (b"fresh", None, None)


def test_set_if_absent_with_ttl_is_a_lease_taken_again_after_it_lapses(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    assert store.set_if_absent("lease", b"worker-1", ttl_seconds=60) is True
    assert stored_row(db_alias, "lease")[2] > now_ms()
    assert store.set_if_absent("lease", b"worker-2", ttl_seconds=60) is False
    expire_value_now(db_alias, "lease")
    assert store.set_if_absent("lease", b"worker-2", ttl_seconds=60) is True
    assert store.get("lease") == b"worker-2"


def _race_set_if_absent(db_alias: str, key: str, threads: int) -> list[bool]:
    return at_once(
        lambda number: stores_for(db_alias).kv.set_if_absent(key, f"thread-{number}".encode(), 60),
        threads,
    )


def test_set_if_absent_from_concurrent_threads_lets_exactly_one_win(db_alias: str) -> None:
    results = _race_set_if_absent(db_alias, "contended", threads=8)
    assert len(results) == 8
    assert results.count(True) == 1
    winner = stores_for(db_alias).kv.get("contended")
    assert winner is not None and winner.startswith(b"thread-")


def test_set_if_absent_from_concurrent_threads_takes_a_lapsed_lease_exactly_once(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    store.set_if_absent("contended", b"old-owner", ttl_seconds=60)
    expire_value_now(db_alias, "contended")
    results = _race_set_if_absent(db_alias, "contended", threads=8)
    assert results.count(True) == 1
    assert store.get("contended").startswith(b"thread-")


# --- replace_if ---


def test_replace_if_replaces_only_the_expected_live_value(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.set_if_absent("k", b"first")
    assert store.replace_if("k", b"other", b"second") is False
    assert store.get("k") == b"first"
    assert store.replace_if("k", b"first", b"second", ttl_seconds=60) is True
    value, counter, expire = stored_row(db_alias, "k")
    assert (value, counter) == (b"second", None) and expire > now_ms()


def test_replace_if_leaves_an_absent_or_expired_key_absent(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    assert store.replace_if("absent", b"x", b"y") is False
    assert store.get("absent") is None
    store.set_if_absent("k", b"old", ttl_seconds=60)
    expire_value_now(db_alias, "k")
    assert store.replace_if("k", b"old", b"new") is False
    assert store.get("k") is None


def test_replace_if_from_concurrent_threads_lets_exactly_one_win(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.set_if_absent("contended", b"holder")

    results = at_once(
        lambda number: stores_for(db_alias).kv.replace_if(
            "contended", b"holder", f"thread-{number}".encode()
        ),
        8,
    )

    assert results.count(True) == 1
    assert store.get("contended").startswith(b"thread-")


# --- ranges ---


def test_range_pages_walk_every_member_oldest_first(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    members = [f"m{n:02}".encode() for n in range(25)]
    store.apply([RangeAdd("r", member) for member in members])
    pages = walk(store, "r", RangeOrder.OLDEST_FIRST, limit=10)
    assert [len(page) for page in pages] == [10, 10, 5]
    assert [member for page in pages for member in page] == members


def test_range_pages_walk_every_member_newest_first(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    members = [f"m{n:02}".encode() for n in range(25)]
    store.apply([RangeAdd("r", member) for member in members])
    pages = walk(store, "r", RangeOrder.NEWEST_FIRST, limit=10)
    assert [len(page) for page in pages] == [10, 10, 5]
    assert [member for page in pages for member in page] == members[::-1]


def test_range_page_next_cursor_is_none_only_on_a_short_page(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", f"m{n}".encode()) for n in range(4)])
    full = store.range_page("r", limit=2)
    assert full.next_cursor == full.items[-1].cursor
    last_full = store.range_page("r", cursor=full.next_cursor, limit=2)
    assert last_full.next_cursor is not None
    empty = store.range_page("r", cursor=last_full.next_cursor, limit=2)
    assert (empty.items, empty.next_cursor) == ([], None)
    assert store.range_page("missing").items == []


def test_members_added_during_an_oldest_first_walk_come_after_it(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", f"a{n}".encode()) for n in range(6)])
    first = store.range_page("r", limit=4)
    store.apply([RangeAdd("r", b"late-1"), RangeAdd("r", b"late-2")])
    second = store.range_page("r", cursor=first.next_cursor, limit=4)
    assert [item.value for item in first.items] == [b"a0", b"a1", b"a2", b"a3"]
    assert [item.value for item in second.items] == [b"a4", b"a5", b"late-1", b"late-2"]
    assert store.range_page("r", limit=4).items == first.items


def test_members_added_during_a_newest_first_walk_do_not_shift_its_pages(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", f"a{n}".encode()) for n in range(6)])
    first = store.range_page("r", limit=4, order=RangeOrder.NEWEST_FIRST)
    store.apply([RangeAdd("r", b"late")])
    second = store.range_page("r", cursor=first.next_cursor, limit=4, order=RangeOrder.NEWEST_FIRST)
    assert [item.value for item in first.items] == [b"a5", b"a4", b"a3", b"a2"]
    assert [item.value for item in second.items] == [b"a1", b"a0"]
    assert second.next_cursor is None


def test_range_add_of_an_existing_member_keeps_its_cursor(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", b"x"), RangeAdd("r", b"y")])
    before = member_cursors(store, "r")
    store.apply([RangeAdd("r", b"x")])
    assert member_cursors(store, "r") == before
    assert store.range_count("r") == 2


def test_range_add_with_ttl_sets_and_without_clears_the_member_expiry(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    select = "SELECT date_expire FROM later_storage_range WHERE range_key = %s AND value = %s"
    with connections[db_alias].cursor() as cursor:
        store.apply([RangeAdd("r", b"x", ttl_seconds=60)])
        cursor.execute(select, ["r", b"x"])
        assert cursor.fetchone()[0] > now_ms()
        store.apply([RangeAdd("r", b"x")])
        cursor.execute(select, ["r", b"x"])
        assert cursor.fetchone()[0] is None


def test_range_add_of_an_expired_member_adds_it_again_at_the_end(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", b"x"), RangeAdd("r", b"y")])
    expire_member_now(db_alias, "r", b"x")
    store.apply([RangeAdd("r", b"x")])
    page = store.range_page("r")
    assert [item.value for item in page.items] == [b"y", b"x"]
    assert page.items[1].cursor > page.items[0].cursor


def test_a_run_of_range_adds_is_one_statement_with_range_adds_effects(db_alias: str) -> None:
    """Two or more consecutive RangeAdds (a fan-in child's edges) are written by one
    statement: new members in order, a live member keeps its cursor and takes the new
    expiry, an expired member is added again at the end, a repeated member once."""
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", b"live", ttl_seconds=60), RangeAdd("r", b"old")])
    expire_member_now(db_alias, "r", b"old")
    kept = member_cursors(store, "r")[b"live"]
    with CaptureQueriesContext(connections[db_alias]) as captured:
        store.apply(
            [
                RangeAdd("r", b"new1"),
                RangeAdd("r", b"live"),
                RangeAdd("r", b"old"),
                RangeAdd("other", b"new2"),
                RangeAdd("r", b"new1"),
            ]
        )
    inserts = [
        q["sql"] for q in captured.captured_queries if "INTO later_storage_range" in q["sql"]
    ]
    # The run, and the expired member's re-insert; MySQL deletes the run's expired
    # members first, so the run's one upsert adds that member again itself.
    assert len(inserts) == (1 if connections[db_alias].vendor == "mysql" else 2)
    page = store.range_page("r")
    assert [item.value for item in page.items] == [b"live", b"new1", b"old"]
    assert page.items[0].cursor == kept
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT date_expire FROM later_storage_range WHERE range_key = 'r' AND value = %s",
            [b"live"],
        )
        assert cursor.fetchone()[0] is None
    assert store.range_members_many(["other"]) == {"other": [b"new2"]}


def test_the_same_member_in_two_ranges_is_two_members(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r1", b"x"), RangeAdd("r2", b"x")])
    assert (store.range_count("r1"), store.range_count("r2")) == (1, 1)


def test_range_remove_removes_one_member_and_absent_members_are_fine(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", b"x"), RangeAdd("r", b"y")])
    store.apply([RangeRemove("r", b"x"), RangeRemove("r", b"never"), RangeRemove("none", b"x")])
    assert [item.value for item in store.range_page("r").items] == [b"y"]


def test_range_clear_removes_every_member_of_that_range_only(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", b"x"), RangeAdd("r", b"y"), RangeAdd("other", b"x")])
    store.apply([RangeClear("r")])
    assert store.range_count("r") == 0
    assert store.range_count("other") == 1


def test_range_expire_sets_a_ttl_on_every_current_member(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", b"x"), RangeAdd("r", b"y"), RangeAdd("other", b"z")])
    store.apply([RangeExpire("r", 60)])
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM later_storage_range WHERE range_key = %s AND date_expire > %s",
            ["r", now_ms()],
        )
        assert cursor.fetchone()[0] == 2
    store.apply([RangeExpire("r", 0)])
    assert store.range_count("r") == 0
    assert store.range_count("other") == 1


def test_expired_members_read_as_absent_in_range_page_and_range_count(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([RangeAdd("r", f"m{n}".encode()) for n in range(5)])
    expire_member_now(db_alias, "r", b"m1")
    expire_member_now(db_alias, "r", b"m3")
    assert store.range_count("r") == 3
    live = [b"m0", b"m2", b"m4"]
    assert [item.value for item in store.range_page("r").items] == live
    newest = store.range_page("r", order=RangeOrder.NEWEST_FIRST)
    assert [item.value for item in newest.items] == live[::-1]
    assert walk(store, "r", RangeOrder.OLDEST_FIRST, limit=2) == [[b"m0", b"m2"], [b"m4"]]


@pytest.mark.parametrize("limit", [0, -1, True, 2.5])
def test_range_page_refuses_a_limit_that_is_not_a_positive_integer(
    db_alias: str, limit: object
) -> None:
    with pytest.raises(ValueError, match="limit"):
        stores_for(db_alias).kv.range_page("r", limit=limit)


@pytest.mark.parametrize(
    ("operation", "error", "named"),
    [
        (Set("", b"v"), ValueError, "1 to 500 characters"),
        (Set("k" * 501, b"v"), ValueError, "1 to 500 characters"),
        (Set("k", "text"), TypeError, "must be bytes"),
        (RangeAdd("r", b"x" * 1025), ValueError, "at most 1024 bytes"),
    ],
)
def test_an_operation_with_a_bad_key_or_value_is_refused_by_name_and_writes_nothing(
    db_alias: str, operation, error, named
) -> None:
    store = stores_for(db_alias).kv
    with pytest.raises(error, match=named):
        store.apply([Set("written-first", b"v"), operation])
    assert store.get("written-first") is None


def test_a_run_of_sets_is_one_statement_and_the_last_set_of_a_key_wins(db_alias: str) -> None:
    from django.test.utils import CaptureQueriesContext

    store = stores_for(db_alias).kv
    operations = [Set(f"job-{n:03}", b"first", ttl_seconds=60) for n in range(50)]
    operations.append(Set("job-007", b"last"))
    with CaptureQueriesContext(connections[db_alias]) as captured:
        store.apply(operations)
    writes = [q["sql"] for q in captured.captured_queries if "later_storage" in q["sql"]]
    assert len(writes) == 1, writes
    values = store.get_many([f"job-{n:03}" for n in range(50)])
    assert len(values) == 50
    assert values["job-007"] == b"last"
    assert values["job-008"] == b"first"


def test_runs_of_sets_and_deletes_keep_the_order_of_the_operations(db_alias: str) -> None:
    store = stores_for(db_alias).kv
    store.apply([Set("a", b"1"), Set("b", b"1"), Set("c", b"1")])
    store.apply(
        [
            Delete("a"),
            Delete("b"),
            Set("b", b"again"),
            Expire("c", 0),
            Set("c", b"renewed"),
            Delete("d"),
        ]
    )
    assert store.get_many(["a", "b", "c", "d"]) == {"b": b"again", "c": b"renewed"}


def test_apply_without_a_savepoint_dooms_the_callers_transaction_on_failure(
    db_alias: str,
) -> None:
    store = stores_for(db_alias).kv
    with pytest.raises(transaction.TransactionManagementError), transaction.atomic(using=db_alias):
        store.apply([Set("outer", b"1")], savepoint=False)
        with pytest.raises(DATABASE_FAILURE):
            store.apply([Set("inner", b"2"), OVERFLOWING_INCREMENT], savepoint=False)
        # Without a savepoint the transaction cannot go on: nothing of it commits.
        store.apply([Set("after", b"3")], savepoint=False)
    assert store.get_many(["outer", "inner", "after"]) == {}


def test_apply_without_a_savepoint_commits_with_the_callers_transaction(db_alias: str) -> None:
    from django.test.utils import CaptureQueriesContext

    store = stores_for(db_alias).kv
    with (
        CaptureQueriesContext(connections[db_alias]) as captured,
        transaction.atomic(using=db_alias),
    ):
        store.apply([Set("a", b"1"), Set("b", b"2")], savepoint=False)
    assert not [q for q in captured.captured_queries if "SAVEPOINT" in q["sql"].upper()]
    assert store.get_many(["a", "b"]) == {"a": b"1", "b": b"2"}
