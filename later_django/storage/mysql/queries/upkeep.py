"""MySQL/MariaDB upkeep: the schema's size from ``information_schema``, the expiry
sweeps as bounded deletes along the expiry indexes, and no write-ahead log or vacuum
for later_django to run (InnoDB recycles its redo log and purges deleted rows online;
``OPTIMIZE TABLE`` would rebuild a table and is no job for a maintenance pass)."""

from __future__ import annotations

from later_django.storage.driver import Driver
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.upkeep import UpkeepQueries
from later_django.storage.types import WalCheckpoint


@MysqlDriver.register
class MysqlUpkeepQueries(UpkeepQueries):
    # The tables and indexes of the connection's database (schema), as InnoDB last
    # estimated them (its statistics, not a walk of the files).
    total_db_size_bytes = (
        "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables"
        " WHERE table_schema = DATABASE()"
    )
    # ``DELETE ... ORDER BY date_expire LIMIT n`` reads the expiry index up to what it
    # deletes (MySQL refuses ``LIMIT`` in an ``IN`` subquery).
    sweep_expired_values = (
        "DELETE FROM later_storage WHERE date_expire IS NOT NULL AND date_expire <= %(now)s"
        " ORDER BY date_expire LIMIT %(limit)s"
    )
    sweep_expired_range_members = (
        "DELETE FROM later_storage_range WHERE date_expire IS NOT NULL"
        " AND date_expire <= %(now)s ORDER BY date_expire LIMIT %(limit)s"
    )

    def checkpoint_wal_above(
        self, driver: Driver, frames: int, truncate_wait_ms: int
    ) -> WalCheckpoint:
        """``NOT_APPLICABLE``: InnoDB recycles its own redo log."""
        return WalCheckpoint.NOT_APPLICABLE

    def vacuum(self, driver: Driver) -> None:
        """Nothing: InnoDB's purge reclaims deleted rows online."""
