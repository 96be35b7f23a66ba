"""Statements of whole-database upkeep: size, sweep of expired rows, WAL, vacuum.

The sweeps delete through a bounded sub-select on the partial indexes
``later_storage_expire_idx`` / ``later_storage_range_expire_idx`` (both
``WHERE date_expire IS NOT NULL``), so one call touches at most ``limit`` rows
and reads no more than it deletes (issue 32: not the whole table, however big,
statistics or none).

The write-ahead log and ``VACUUM`` are SQLite's alone: each vendor's query
class says what its database does for them (PostgreSQL: nothing).
"""

from __future__ import annotations

from later_django.storage.driver import Driver
from later_django.storage.types import WalCheckpoint


class UpkeepQueries:
    """Upkeep statements, and the vendor's WAL checkpoint and vacuum."""

    # Spelled per vendor. Both run inside ``Driver.index_walks_only``.
    #: (now, limit): deletes up to ``limit`` values expired at ``now``.
    sweep_expired_values: str
    #: (now, limit): deletes up to ``limit`` range members expired at ``now``.
    sweep_expired_range_members: str
    #: -> (size in bytes of the whole database,)
    total_db_size_bytes: str

    def checkpoint_wal_above(
        self, driver: Driver, frames: int, truncate_wait_ms: int
    ) -> WalCheckpoint:
        """See :meth:`later_django.storage.upkeep.UpkeepStore.checkpoint_wal_above`."""
        raise NotImplementedError

    def vacuum(self, driver: Driver) -> None:
        """See :meth:`later_django.storage.upkeep.UpkeepStore.vacuum`."""
        raise NotImplementedError
