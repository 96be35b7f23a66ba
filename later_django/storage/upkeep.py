"""Whole-database upkeep: size, sweep of expired rows, SQLite WAL checkpoints, vacuum.

Nothing here runs on a job's hot path; the maintenance passes call it. Each
method is bounded so that no call holds SQLite's one write lock for long, and
each does what it is asked when it is asked: when to sweep, checkpoint or
vacuum (and how long to back off) is the passes' decision
(:mod:`later_django.maintenance.wal_checkpoint` for the write-ahead log).
"""

from __future__ import annotations

from later_django.core.clock import now_ms
from later_django.storage.driver import Driver
from later_django.storage.queries.upkeep import UpkeepQueries
from later_django.storage.types import WalCheckpoint


class UpkeepStore:
    """The whole-database upkeep part of the storage contract, on one driver's connection."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(UpkeepQueries)

    def total_db_size_bytes(self) -> int | None:
        """On-disk size of the whole database (not only Later's tables).

        SQLite: ``page_count * page_size`` as this connection sees it (pages still in
        the write-ahead log included). PostgreSQL: ``pg_database_size`` of the
        current database. MySQL/MariaDB: the data and index lengths of the current
        schema's tables (``information_schema.tables``), InnoDB's estimate as of its
        last statistics of each table (refreshed after about a tenth of a table
        changed, or by ``ANALYZE TABLE``; MySQL 8.0 also caches them for
        ``information_schema_stats_expiry``, a day by default).
        """
        row = self._driver.fetch_one(self._q.total_db_size_bytes)
        return None if row is None or row[0] is None else int(row[0])

    def sweep_expired(self, limit: int) -> int:
        """Deletes up to ``limit`` expired rows in total, across ``later_storage`` and
        ``later_storage_range``; returns how many. Unexpired rows are never touched.

        Expired values go first and the range members share what is left of
        ``limit``. Each table is one short statement in its own transaction (a
        savepoint when the caller is in one), so no call holds the write lock for
        long: loop until it returns less than ``limit`` to catch up. Each reads the
        expiry index up to what it deletes, never the table
        (``Driver.index_walks_only``).
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
        if limit == 0:
            return 0
        q, driver, now = self._q, self._driver, now_ms()
        with driver.index_walks_only():
            removed = driver.execute(q.sweep_expired_values, {"now": now, "limit": limit})
        remaining = limit - removed
        if remaining > 0:
            with driver.index_walks_only():
                removed += driver.execute(
                    q.sweep_expired_range_members, {"now": now, "limit": remaining}
                )
        return removed

    def checkpoint_wal_above(self, frames: int, truncate_wait_ms: int) -> WalCheckpoint:
        """A truncating checkpoint when SQLite's log holds at least ``frames`` frames.

        First a passive checkpoint (it never blocks anyone and does most of the
        copying); ``BELOW_THRESHOLD`` if the log is still smaller than ``frames``.
        Otherwise a truncating checkpoint that waits at most ``truncate_wait_ms`` for
        readers: ``TRUNCATED`` (the ``-wal`` file is empty) or ``GAVE_UP``, rather
        than stall writers behind a reader that never finishes. The connection's
        ``busy_timeout`` is restored afterwards, also when the checkpoint fails.
        ``NOT_APPLICABLE`` on PostgreSQL, on MySQL/MariaDB (InnoDB recycles its redo
        log) and on SQLite outside WAL mode. On SQLite
        inside ``transaction.atomic()`` it raises ``TransactionManagementError``.
        """
        return self._q.checkpoint_wal_above(self._driver, frames, truncate_wait_ms)

    def vacuum(self) -> None:
        """Returns freed pages to the file system.

        SQLite: ``VACUUM``, which rebuilds the whole file under an exclusive lock
        (in WAL mode the file shrinks at the next checkpoint). SQLite cannot vacuum
        inside a transaction, so this raises ``TransactionManagementError`` when
        called inside ``transaction.atomic()``. PostgreSQL: does nothing;
        autovacuum reclaims dead rows online. MySQL/MariaDB: does nothing; InnoDB's
        purge reclaims deleted rows online (``OPTIMIZE TABLE`` would rebuild a table,
        which no maintenance pass should).
        """
        self._q.vacuum(self._driver)
