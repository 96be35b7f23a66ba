"""SQLite upkeep: page-count size, WAL checkpoints, ``VACUUM``.

A checkpoint and ``VACUUM`` cannot run inside a transaction, so both refuse to
be called inside ``transaction.atomic()`` with ``TransactionManagementError``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from later_django.storage.driver import Driver
from later_django.storage.queries.upkeep import UpkeepQueries
from later_django.storage.sqlite import SqliteDriver
from later_django.storage.types import WalCheckpoint

#: SQLite keeps ``busy_timeout`` in a C int of milliseconds.
MAX_BUSY_TIMEOUT_MS = 2_147_483_647


def set_busy_timeout(milliseconds: int) -> str:
    """``PRAGMA busy_timeout = <milliseconds>``.

    The one statement of later_django that carries a value in its text: a
    PRAGMA takes no bound parameters. The value must be an ``int`` in SQLite's
    range (``ValueError`` otherwise), so the text can only ever be this PRAGMA
    with a number.
    """
    if (
        isinstance(milliseconds, bool)
        or not isinstance(milliseconds, int)
        or not 0 <= milliseconds <= MAX_BUSY_TIMEOUT_MS
    ):
        raise ValueError(
            f"busy_timeout must be an integer from 0 to {MAX_BUSY_TIMEOUT_MS} ms, "
            f"got {milliseconds!r}"
        )
    return "PRAGMA busy_timeout = " + str(int(milliseconds))


@SqliteDriver.register
class SqliteUpkeepQueries(UpkeepQueries):
    # The expiry index named: never a walk of the table (or of its primary key)
    # filtered by the expiry.
    sweep_expired_values = (
        "DELETE FROM later_storage WHERE key IN ("
        "SELECT key FROM later_storage INDEXED BY later_storage_expire_idx "
        "WHERE date_expire IS NOT NULL AND date_expire <= %(now)s LIMIT %(limit)s)"
    )
    sweep_expired_range_members = (
        "DELETE FROM later_storage_range WHERE sequence IN ("
        "SELECT sequence FROM later_storage_range INDEXED BY later_storage_range_expire_idx "
        "WHERE date_expire IS NOT NULL AND date_expire <= %(now)s LIMIT %(limit)s)"
    )
    total_db_size_bytes = (
        "SELECT (SELECT page_count FROM pragma_page_count()) "
        "* (SELECT page_size FROM pragma_page_size())"
    )
    #: -> (busy, log frames, checkpointed frames); log frames is -1 outside WAL mode.
    wal_checkpoint_passive = "PRAGMA wal_checkpoint(PASSIVE)"
    wal_checkpoint_truncate = "PRAGMA wal_checkpoint(TRUNCATE)"
    busy_timeout = "PRAGMA busy_timeout"
    vacuum_database = "VACUUM"

    def checkpoint_wal_above(
        self, driver: Driver, frames: int, truncate_wait_ms: int
    ) -> WalCheckpoint:
        """A passive checkpoint, then a truncating one waiting at most
        ``truncate_wait_ms`` for readers when the log still holds ``frames`` frames
        or more; the connection's ``busy_timeout`` is restored afterwards, also
        when the checkpoint fails."""
        _refuse_inside_atomic_block(driver, "checkpoint_wal_above()", "a WAL checkpoint")
        _, log_frames, _ = _one_row(driver, self.wal_checkpoint_passive)
        if log_frames < 0:
            return WalCheckpoint.NOT_APPLICABLE
        if log_frames < frames:
            return WalCheckpoint.BELOW_THRESHOLD
        (original_wait_ms,) = _one_row(driver, self.busy_timeout)
        with driver.cursor() as cursor:
            cursor.execute(set_busy_timeout(truncate_wait_ms))
            try:
                cursor.execute(self.wal_checkpoint_truncate)
                busy, _, _ = cursor.fetchone()
            finally:
                # The connection stays open for the rest of the thread: give it back
                # its own wait, not the short one.
                cursor.execute(set_busy_timeout(original_wait_ms))
        return WalCheckpoint.TRUNCATED if busy == 0 else WalCheckpoint.GAVE_UP

    def vacuum(self, driver: Driver) -> None:
        """``VACUUM``: rebuilds the whole file under an exclusive lock."""
        _refuse_inside_atomic_block(driver, "vacuum()", "VACUUM")
        driver.execute(self.vacuum_database)


def _refuse_inside_atomic_block(driver: Driver, call: str, what: str) -> None:
    if driver.connection.in_atomic_block:
        raise transaction.TransactionManagementError(
            f"{call} on database {driver.using!r} was called inside transaction.atomic(); "
            f"SQLite cannot run {what} inside a transaction, so call it outside any "
            "atomic block"
        )


def _one_row(driver: Driver, sql: str) -> tuple[Any, ...]:
    """The row a PRAGMA always returns."""
    row = driver.fetch_one(sql)
    if row is None:
        raise RuntimeError(f"SQLite returned no row for {sql!r}")
    return row
