"""Whole-database upkeep: size, sweep of expired rows, SQLite WAL checkpoints, vacuum.

Nothing here runs on a job's hot path; the maintenance passes call it. Each
method is bounded so that no call holds SQLite's one write lock for long.
"""

from __future__ import annotations

import logging
import time

from django.db import transaction

from later_django.core.clock import now_ms
from later_django.storage.db import AliasBound, SqlRunner
from later_django.storage.sql.upkeep import STATEMENTS, set_busy_timeout
from later_django.storage.types import WalCheckpoint

logger = logging.getLogger("later_django.storage.upkeep")

#: Log size in frames (4 KiB pages, about 128 MB) at which a truncating checkpoint is tried.
WAL_CHECKPOINT_FRAMES = 32_768
#: Least time between two looks at the log size, so ``checkpoint_wal`` is cheap to call often.
WAL_CHECK_INTERVAL_MS = 5_000
#: How long a truncating checkpoint waits for readers. Writers wait behind it for as long,
#: so in-flight reads can finish and no new one starts; it must outlast the slowest read
#: on a loaded host (a 2 s wait gave up every time on a CPU-throttled container).
WAL_TRUNCATE_WAIT_MS = 15_000
#: Back-off after a truncating checkpoint gave up, so a database that is never idle is
#: not stalled for the full wait over and over.
WAL_RETRY_AFTER_BUSY_MS = 15_000


def _monotonic_ms() -> int:
    # The WAL timers are in-process intervals: a wall-clock step must not stretch them.
    return time.monotonic_ns() // 1_000_000


class UpkeepStore(AliasBound):
    """The whole-database upkeep part of the storage contract, on the alias ``using``.

    Holds the WAL-check timer of this instance (one per storage object).
    """

    def __init__(self, using: str = "default") -> None:
        super().__init__(using)
        self._wal_check_not_before_ms = 0

    @property
    def _upkeep_sql(self) -> SqlRunner:
        return SqlRunner(self.using, STATEMENTS)

    def total_db_size_bytes(self) -> int | None:
        """On-disk size of the whole database (not only Later's tables).

        SQLite: ``page_count * page_size`` as this connection sees it (pages still in
        the write-ahead log included). PostgreSQL: ``pg_database_size`` of the
        current database.
        """
        row = self._upkeep_sql.fetch_one("total_db_size_bytes")
        return None if row is None or row[0] is None else int(row[0])

    def sweep_expired(self, limit: int) -> int:
        """Deletes up to ``limit`` expired rows in total, across ``later_storage`` and
        ``later_storage_range``; returns how many. Unexpired rows are never touched.

        Expired values go first and the range members share what is left of
        ``limit``. Each table is one short statement in its own transaction (none
        is opened when the caller is in one), so no call holds the write lock for
        long: loop until it returns less than ``limit`` to catch up.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
        if limit == 0:
            return 0
        runner = self._upkeep_sql
        now = now_ms()
        removed = runner.execute("sweep_expired_values", [now, limit])
        remaining = limit - removed
        if remaining > 0:
            removed += runner.execute("sweep_expired_range_members", [now, remaining])
        return removed

    def checkpoint_wal(self) -> WalCheckpoint:
        """Keeps SQLite's write-ahead log from growing without bound; cheap when called often.

        Returns ``SKIPPED`` without touching the database when the log was looked at
        less than ``WAL_CHECK_INTERVAL_MS`` ago, or less than
        ``WAL_RETRY_AFTER_BUSY_MS`` after a truncating checkpoint gave up. Otherwise
        it is :meth:`checkpoint_wal_above` with ``WAL_CHECKPOINT_FRAMES`` and
        ``WAL_TRUNCATE_WAIT_MS``. ``NOT_APPLICABLE`` on PostgreSQL and on SQLite
        outside WAL mode. On SQLite inside ``transaction.atomic()`` it raises
        ``TransactionManagementError`` (a checkpoint cannot run in a transaction).
        """
        if self.connection.vendor != "sqlite":
            return WalCheckpoint.NOT_APPLICABLE
        self._refuse_inside_atomic_block("checkpoint_wal()", "a WAL checkpoint")
        if _monotonic_ms() < self._wal_check_not_before_ms:
            return WalCheckpoint.SKIPPED
        self._wal_check_not_before_ms = _monotonic_ms() + WAL_CHECK_INTERVAL_MS
        outcome = self.checkpoint_wal_above(WAL_CHECKPOINT_FRAMES, WAL_TRUNCATE_WAIT_MS)
        if outcome is WalCheckpoint.TRUNCATED:
            logger.info("Truncated the SQLite write-ahead log of database %r", self.using)
        elif outcome is WalCheckpoint.GAVE_UP:
            logger.debug(
                "A reader kept the SQLite write-ahead log of database %r from truncating; "
                "backing off for %d ms",
                self.using,
                WAL_RETRY_AFTER_BUSY_MS,
            )
            self._wal_check_not_before_ms = _monotonic_ms() + WAL_RETRY_AFTER_BUSY_MS
        return outcome

    def checkpoint_wal_above(self, frames: int, truncate_wait_ms: int) -> WalCheckpoint:
        """A truncating checkpoint when SQLite's log holds at least ``frames`` frames.

        First a passive checkpoint (it never blocks anyone and does most of the
        copying); ``BELOW_THRESHOLD`` if the log is still smaller than ``frames``.
        Otherwise a truncating checkpoint that waits at most ``truncate_wait_ms`` for
        readers: ``TRUNCATED`` (the ``-wal`` file is empty) or ``GAVE_UP``, rather
        than stall writers behind a reader that never finishes. The connection's
        ``busy_timeout`` is restored afterwards, also when the checkpoint fails.
        ``NOT_APPLICABLE`` on PostgreSQL and on SQLite outside WAL mode. On SQLite
        inside ``transaction.atomic()`` it raises ``TransactionManagementError``.
        """
        if self.connection.vendor != "sqlite":
            return WalCheckpoint.NOT_APPLICABLE
        self._refuse_inside_atomic_block("checkpoint_wal_above()", "a WAL checkpoint")
        runner = self._upkeep_sql
        _, log_frames, _ = runner.fetch_one("wal_checkpoint_passive")
        if log_frames < 0:
            return WalCheckpoint.NOT_APPLICABLE
        if log_frames < frames:
            return WalCheckpoint.BELOW_THRESHOLD
        (original_wait_ms,) = runner.fetch_one("busy_timeout")
        with runner.connection.cursor() as cursor:
            cursor.execute(set_busy_timeout(truncate_wait_ms))
            try:
                cursor.execute(runner.sql("wal_checkpoint_truncate"))
                busy, _, _ = cursor.fetchone()
            finally:
                # The connection stays open for the rest of the thread: give it back
                # its own wait, not the short one.
                cursor.execute(set_busy_timeout(original_wait_ms))
        return WalCheckpoint.TRUNCATED if busy == 0 else WalCheckpoint.GAVE_UP

    def vacuum(self) -> None:
        """Returns freed pages to the file system.

        SQLite: ``VACUUM``, which rebuilds the whole file under an exclusive lock
        (in WAL mode the file shrinks at the next checkpoint). SQLite cannot vacuum
        inside a transaction, so this raises ``TransactionManagementError`` when
        called inside ``transaction.atomic()``. PostgreSQL: does nothing;
        autovacuum reclaims dead rows online.
        """
        connection = self.connection
        if connection.vendor != "sqlite":
            return
        self._refuse_inside_atomic_block("vacuum()", "VACUUM")
        self._upkeep_sql.execute("vacuum")

    def _refuse_inside_atomic_block(self, call: str, what: str) -> None:
        if self.connection.in_atomic_block:
            raise transaction.TransactionManagementError(
                f"{call} on database {self.using!r} was called inside transaction.atomic(); "
                f"SQLite cannot run {what} inside a transaction, so call it outside any "
                "atomic block"
            )
