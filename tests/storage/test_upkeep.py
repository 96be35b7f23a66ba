"""Whole-database upkeep (``UpkeepStore``): size, sweep, WAL checkpoints, vacuum."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections, transaction

from later_django.core.clock import now_ms
from later_django.storage.sqlite.queries.upkeep import SqliteUpkeepQueries
from later_django.storage.stores import stores_for
from later_django.storage.types import Increment, RangeAdd, Set, WalCheckpoint
from later_django.storage.upkeep import UpkeepStore
from tests.conftest import use_database
from tests.storage import three_databases
from tests.storage.three_databases import key_column

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

MEGABYTE = 1 << 20


def expire_everything_now(db_alias: str, like: str) -> None:
    """Moves the expiry of matching values and range members into the past."""
    past = now_ms() - 1_000
    with connections[db_alias].cursor() as cursor:
        cursor.execute(
            f"UPDATE later_storage SET date_expire = %s WHERE {key_column(db_alias)} LIKE %s",
            [past, like],
        )
        cursor.execute(
            "UPDATE later_storage_range SET date_expire = %s WHERE range_key LIKE %s",
            [past, like],
        )


def write_megabytes(db_alias: str, megabytes: int, prefix: str) -> None:
    """Random (incompressible) 64 KiB values, so the database really grows."""
    store = stores_for(db_alias).kv
    for number in range(megabytes * 16):
        store.apply([Set(f"{prefix}-{number}", os.urandom(64 * 1024))])


def sweep_all(store: UpkeepStore, limit: int) -> int:
    total = 0
    while (removed := store.sweep_expired(limit)) == limit:
        total += removed
    return total + removed


def wal_size(db_alias: str) -> int:
    wal = Path(connections[db_alias].settings_dict["NAME"] + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def write_some(db_alias: str, count: int) -> None:
    store = stores_for(db_alias).kv
    for number in range(count):
        store.apply([Set(f"wal-key-{number}", bytes([7]) * 2_000)])


def busy_timeout_ms(db_alias: str) -> int:
    with connections[db_alias].cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        return cursor.fetchone()[0]


@pytest.fixture
def reader(sqlite_alias: str) -> Iterator[sqlite3.Connection]:
    """A separate raw SQLite connection (Django's would BEGIN IMMEDIATE, a write lock)."""
    connection = sqlite3.connect(
        connections[sqlite_alias].settings_dict["NAME"], isolation_level=None
    )
    try:
        yield connection
    finally:
        connection.close()


# --- size ---


def test_total_db_size_is_positive_and_grows_after_writing_megabytes(
    db_alias: str, vendor: str
) -> None:
    store = stores_for(db_alias).upkeep
    # Earlier tests leave free pages in the SQLite file, which new rows would reuse
    # without growing it; VACUUM returns them first (a no-op on PostgreSQL and MariaDB).
    store.vacuum()
    before = store.total_db_size_bytes()
    assert before > 0
    write_megabytes(db_alias, 3, "size")
    if vendor == "mysql":
        # MySQL/MariaDB answer InnoDB's statistics, which a table's growth refreshes
        # later (after a tenth of it changed, in the background): refreshed now.
        with connections[db_alias].cursor() as cursor:
            cursor.execute("ANALYZE TABLE later_storage")
            cursor.fetchall()
    assert store.total_db_size_bytes() >= before + 2 * MEGABYTE


# --- sweep ---


def test_sweep_removes_at_most_limit_rows_across_both_tables(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.apply(
        [Set(f"old-{n}", b"v") for n in range(7)]
        + [RangeAdd("old-range", f"m{n}".encode()) for n in range(7)]
    )
    expire_everything_now(db_alias, "old-%")
    store = stores_for(db_alias).upkeep
    assert [store.sweep_expired(5) for _ in range(4)] == [5, 5, 4, 0]
    with connections[db_alias].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_storage")
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT COUNT(*) FROM later_storage_range")
        assert cursor.fetchone()[0] == 0


def test_sweep_never_removes_unexpired_rows(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.apply(
        [
            Set("old", b"v"),
            RangeAdd("old-range", b"m"),
            Set("forever", b"v"),
            Set("later", b"v", ttl_seconds=3_600),
            Increment("counter"),
            RangeAdd("live-range", b"forever"),
            RangeAdd("live-range", b"later", ttl_seconds=3_600),
        ]
    )
    expire_everything_now(db_alias, "old%")
    assert stores_for(db_alias).upkeep.sweep_expired(100) == 2
    assert kv.get_many(["forever", "later"]) == {"forever": b"v", "later": b"v"}
    with connections[db_alias].cursor() as cursor:
        key = key_column(db_alias)
        cursor.execute(f"SELECT {key} FROM later_storage ORDER BY {key}")
        assert [row[0] for row in cursor.fetchall()] == ["counter", "forever", "later"]
    assert kv.range_count("live-range") == 2


def test_sweeping_in_a_loop_removes_every_expired_row(db_alias: str) -> None:
    kv = stores_for(db_alias).kv
    kv.apply(
        [Set(f"old-{n}", b"v") for n in range(30)]
        + [RangeAdd(f"old-range-{n % 3}", f"m{n}".encode()) for n in range(40)]
        + [Set("keep", b"v")]
    )
    expire_everything_now(db_alias, "old-%")
    store = stores_for(db_alias).upkeep
    assert sweep_all(store, 7) == 70
    assert store.sweep_expired(7) == 0
    assert kv.get("keep") == b"v"


def test_sweep_with_limit_zero_removes_nothing(db_alias: str) -> None:
    stores_for(db_alias).kv.apply([Set("old", b"v")])
    expire_everything_now(db_alias, "old")
    store = stores_for(db_alias).upkeep
    assert store.sweep_expired(0) == 0
    assert store.sweep_expired(1) == 1


def test_sweep_refuses_a_negative_limit(db_alias: str) -> None:
    with pytest.raises(ValueError, match="limit"):
        stores_for(db_alias).upkeep.sweep_expired(-1)


# --- vacuum ---


def test_index_walks_only_switches_sequential_scans_off_for_its_block_alone(
    postgres_alias: str,
) -> None:
    """The sweeps' and the reconcile's pin (issue 32): off inside, back to the caller's
    value after, also when the block runs inside the caller's transaction."""
    driver = stores_for(postgres_alias).driver

    def settings() -> tuple[str, str]:
        row = driver.fetch_one(
            "SELECT current_setting('enable_seqscan'), current_setting('enable_bitmapscan')"
        )
        assert row is not None
        return row[0], row[1]

    with transaction.atomic(using=postgres_alias):
        driver.execute("SET LOCAL enable_bitmapscan = off")
        with driver.index_walks_only():
            assert settings() == ("off", "off")
        assert settings() == ("on", "off")
    assert settings() == ("on", "on")
    with driver.index_walks_only():
        assert settings() == ("off", "off")
    assert settings() == ("on", "on")


def test_vacuum_shrinks_the_sqlite_file_after_deleting_and_sweeping(sqlite_alias: str) -> None:
    store = stores_for(sqlite_alias).upkeep
    path = Path(connections[sqlite_alias].settings_dict["NAME"])
    write_megabytes(sqlite_alias, 4, "bulk")
    assert store.checkpoint_wal_above(1, 1_000) is WalCheckpoint.TRUNCATED
    full_size = path.stat().st_size
    expire_everything_now(sqlite_alias, "bulk-%")
    sweep_all(store, 1_000)
    # A DELETE only frees pages for reuse; the file keeps its size until VACUUM.
    assert store.checkpoint_wal_above(1, 1_000) is WalCheckpoint.TRUNCATED
    assert path.stat().st_size >= full_size

    store.vacuum()
    assert store.checkpoint_wal_above(1, 1_000) is WalCheckpoint.TRUNCATED
    assert path.stat().st_size < full_size - 3 * MEGABYTE


def test_vacuum_inside_a_transaction_is_refused_on_sqlite(sqlite_alias: str) -> None:
    with (
        transaction.atomic(using=sqlite_alias),
        pytest.raises(transaction.TransactionManagementError, match="inside a transaction"),
    ):
        stores_for(sqlite_alias).upkeep.vacuum()


@pytest.fixture(params=["postgres", "mariadb"])
def server_alias(request: pytest.FixtureRequest) -> str:
    """PostgreSQL, then MariaDB: servers that recycle their log and reclaim rows online."""
    return use_database(request, request.param)


def test_vacuum_does_nothing_on_postgresql_and_mariadb(server_alias: str) -> None:
    stores_for(server_alias).kv.apply([Set("k", b"v")])
    with transaction.atomic(using=server_alias):
        stores_for(server_alias).upkeep.vacuum()
    assert stores_for(server_alias).kv.get("k") == b"v"


# --- WAL checkpoints ---


def test_checkpoint_truncates_a_large_log_and_leaves_a_small_one(sqlite_alias: str) -> None:
    store = stores_for(sqlite_alias).upkeep
    write_some(sqlite_alias, 40)
    assert wal_size(sqlite_alias) > 0, "writes should have left a log behind"

    assert store.checkpoint_wal_above(1_000_000, 2_000) is WalCheckpoint.BELOW_THRESHOLD
    assert wal_size(sqlite_alias) > 0, "a small log is left alone"

    assert store.checkpoint_wal_above(1, 1_000) is WalCheckpoint.TRUNCATED
    assert wal_size(sqlite_alias) == 0, "a large log is cut back to nothing"


def test_checkpoint_gives_up_quickly_behind_a_reader_instead_of_stalling_writers(
    sqlite_alias: str, reader: sqlite3.Connection
) -> None:
    store = stores_for(sqlite_alias).upkeep
    write_some(sqlite_alias, 10)
    original_wait_ms = busy_timeout_ms(sqlite_alias)

    # A reader holding a snapshot while more is written: the log cannot be
    # reset until it finishes.
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM later_storage").fetchone()
    write_some(sqlite_alias, 10)

    started = time.monotonic()
    assert store.checkpoint_wal_above(1, 1_000) is WalCheckpoint.GAVE_UP
    elapsed = time.monotonic() - started
    assert elapsed < 6, f"gave up after {elapsed:.1f} s"
    assert busy_timeout_ms(sqlite_alias) == original_wait_ms, "the short wait was left behind"

    reader.execute("ROLLBACK")
    assert store.checkpoint_wal_above(1, 1_000) is WalCheckpoint.TRUNCATED
    assert wal_size(sqlite_alias) == 0


def test_checkpoint_restores_the_busy_timeout_when_it_fails(
    sqlite_alias: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_some(sqlite_alias, 5)
    original_wait_ms = busy_timeout_ms(sqlite_alias)
    # A truncating checkpoint that errors.
    monkeypatch.setattr(SqliteUpkeepQueries, "wal_checkpoint_truncate", "SELECT no_such_function()")
    with pytest.raises(Exception, match="no_such_function"):
        stores_for(sqlite_alias).upkeep.checkpoint_wal_above(1, 1_000)
    assert busy_timeout_ms(sqlite_alias) == original_wait_ms


def test_checkpoint_inside_a_transaction_is_refused_on_sqlite(sqlite_alias: str) -> None:
    with (
        transaction.atomic(using=sqlite_alias),
        pytest.raises(transaction.TransactionManagementError, match="inside a transaction"),
    ):
        stores_for(sqlite_alias).upkeep.checkpoint_wal_above(1, 1_000)


def test_checkpoint_is_not_applicable_on_postgresql_and_mariadb(server_alias: str) -> None:
    store = stores_for(server_alias).upkeep
    assert store.checkpoint_wal_above(1, 1_000) is WalCheckpoint.NOT_APPLICABLE
