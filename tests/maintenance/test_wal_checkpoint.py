"""The WAL checkpoint pass: SQLite's write-ahead log truncated past 32,768 frames."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

from later_django.core.clock import now_ms
from later_django.core.keys import pass_lease_key
from later_django.maintenance import PassContext, wal_checkpoint
from later_django.models import StorageValue
from later_django.storage.stores import stores_for
from later_django.storage.types import Set
from tests.maintenance.conftest import NAMESPACE, make_runner

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: SQLite's WAL header and per-frame header sizes, to read the log size in frames.
WAL_HEADER_BYTES = 32
FRAME_HEADER_BYTES = 24


def wal_path(alias: str) -> Path:
    return Path(connections[alias].settings_dict["NAME"] + "-wal")


def wal_frames(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("PRAGMA page_size")
        page_size = cursor.fetchone()[0]
    size = wal_path(alias).stat().st_size
    return max(0, (size - WAL_HEADER_BYTES) // (page_size + FRAME_HEADER_BYTES))


@pytest.fixture
def no_autocheckpoint(sqlite_db: str) -> Iterator[str]:
    """The test connection does not checkpoint on its own, so its log keeps growing."""
    with connections[sqlite_db].cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint = 0")
    try:
        yield sqlite_db
    finally:
        with connections[sqlite_db].cursor() as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint = 1000")


def grow_wal(alias: str, megabytes: int) -> None:
    """Writes ``megabytes`` one-MiB values, one transaction each."""
    kv = stores_for(alias).kv
    value = b"\0" * (1 << 20)
    for n in range(megabytes):
        kv.apply([Set(f"wal-test-{n:04}", value, ttl_seconds=3600)])


@pytest.mark.sqlite_only
def test_the_checkpoint_pass_truncates_a_log_of_more_than_32768_frames(
    no_autocheckpoint: str,
) -> None:
    alias = no_autocheckpoint
    grow_wal(alias, 140)
    frames = wal_frames(alias)
    assert frames > wal_checkpoint.WAL_CHECKPOINT_FRAMES
    runs = make_runner(alias, "wal_checkpoint").run_due()
    assert [(run.name, run.done, run.error) for run in runs] == [("wal_checkpoint", 1, None)]
    # Truncated to nothing; the lease write after the run starts the log again.
    assert wal_frames(alias) <= 4
    # Nothing was lost: every value is still there.
    assert StorageValue.objects.using(alias).filter(key__startswith="wal-test-").count() == 140


@pytest.mark.sqlite_only
def test_the_checkpoint_pass_leaves_a_small_log_alone(no_autocheckpoint: str) -> None:
    alias = no_autocheckpoint
    grow_wal(alias, 2)
    runs = make_runner(alias, "wal_checkpoint").run_due()
    assert [(run.name, run.done, run.error) for run in runs] == [("wal_checkpoint", 0, None)]
    assert wal_path(alias).stat().st_size > 0


@pytest.mark.sqlite_only
def test_a_checkpoint_that_gave_up_keeps_every_process_off_for_15_seconds(
    no_autocheckpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    alias = no_autocheckpoint
    monkeypatch.setattr(wal_checkpoint, "WAL_CHECKPOINT_FRAMES", 10)
    monkeypatch.setattr(wal_checkpoint, "WAL_TRUNCATE_WAIT_MS", 200)
    grow_wal(alias, 1)
    # A reader in the middle of a read transaction keeps the log from being reset.
    reader = sqlite3.connect(connections[alias].settings_dict["NAME"])
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM later_storage").fetchone()
        before = now_ms()
        runs = make_runner(alias, "wal_checkpoint", owner="A").run_due()
        assert [(run.name, run.done, run.error) for run in runs] == [("wal_checkpoint", 0, None)]
    finally:
        reader.close()
    assert wal_path(alias).stat().st_size > 0
    lease = StorageValue.objects.using(alias).get(key=pass_lease_key(NAMESPACE, "wal_checkpoint"))
    assert lease.date_expire >= before + wal_checkpoint.WAL_RETRY_AFTER_BUSY_MS
    assert make_runner(alias, "wal_checkpoint", owner="B").run_due(force=True) == []


def test_the_checkpoint_pass_takes_no_lease_on_postgres(postgres_alias: str) -> None:
    runs = make_runner(postgres_alias, "wal_checkpoint").run_due()
    assert runs == []
    assert stores_for(postgres_alias).kv.get(pass_lease_key(NAMESPACE, "wal_checkpoint")) is None
    context = PassContext(
        using=postgres_alias,
        namespace=NAMESPACE,
        settings=make_runner(postgres_alias).settings,
        owner="x",
        deadline=0.0,
    )
    assert wal_checkpoint.checkpoint_wal(context) == 0
