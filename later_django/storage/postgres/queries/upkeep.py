"""PostgreSQL upkeep: its database size; no write-ahead log to truncate, no vacuum to run."""

from __future__ import annotations

from later_django.storage.driver import Driver
from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.upkeep import UpkeepQueries
from later_django.storage.types import WalCheckpoint


@PostgresDriver.register
class PostgresUpkeepQueries(UpkeepQueries):
    total_db_size_bytes = "SELECT pg_database_size(current_database())"

    def checkpoint_wal_above(
        self, driver: Driver, frames: int, truncate_wait_ms: int
    ) -> WalCheckpoint:
        """``NOT_APPLICABLE``: PostgreSQL recycles its own log."""
        return WalCheckpoint.NOT_APPLICABLE

    def vacuum(self, driver: Driver) -> None:
        """Nothing: autovacuum reclaims dead rows online."""
