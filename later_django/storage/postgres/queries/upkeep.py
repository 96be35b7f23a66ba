"""PostgreSQL upkeep: its database size; no write-ahead log to truncate, no vacuum to run."""

from __future__ import annotations

from later_django.storage.driver import Driver
from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.upkeep import UpkeepQueries
from later_django.storage.types import WalCheckpoint


@PostgresDriver.register
class PostgresUpkeepQueries(UpkeepQueries):
    total_db_size_bytes = "SELECT pg_database_size(current_database())"
    # The expired keys first (an array: its length hidden from the planner, so
    # the delete probes the primary key per key; a semi-join was planned as a
    # hash join over a scan of the whole table, the generic plan's every time),
    # the oldest first along the expiry index.
    sweep_expired_values = (
        "DELETE FROM later_storage WHERE key = ANY(ARRAY("
        "SELECT key FROM later_storage WHERE date_expire IS NOT NULL"
        " AND date_expire <= %(now)s ORDER BY date_expire LIMIT %(limit)s))"
    )
    sweep_expired_range_members = (
        "DELETE FROM later_storage_range WHERE sequence = ANY(ARRAY("
        "SELECT sequence FROM later_storage_range WHERE date_expire IS NOT NULL"
        " AND date_expire <= %(now)s ORDER BY date_expire LIMIT %(limit)s))"
    )

    def checkpoint_wal_above(
        self, driver: Driver, frames: int, truncate_wait_ms: int
    ) -> WalCheckpoint:
        """``NOT_APPLICABLE``: PostgreSQL recycles its own log."""
        return WalCheckpoint.NOT_APPLICABLE

    def vacuum(self, driver: Driver) -> None:
        """Nothing: autovacuum reclaims dead rows online."""
