"""The upkeep port: whole-database size, sweeps, WAL checkpoint and vacuum.

``UpkeepPort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from later_django.storage.types import WalCheckpoint


@runtime_checkable
class UpkeepPort(Protocol):
    """Whole-database upkeep: size, bounded sweeps of expired rows, WAL checkpoint, vacuum.
    Implemented by :class:`~later_django.storage.upkeep.UpkeepStore`."""

    def total_db_size_bytes(self) -> int | None:
        """On-disk size of the whole database (not only Later's tables)."""

    def sweep_expired(self, limit: int) -> int:
        """Deletes up to ``limit`` expired rows in total, across ``later_storage`` and
        ``later_storage_range``; returns how many. Unexpired rows are never touched."""

    def checkpoint_wal_above(self, frames: int, truncate_wait_ms: int) -> WalCheckpoint:
        """A truncating checkpoint when SQLite's log holds at least ``frames`` frames."""

    def vacuum(self) -> None:
        """Returns freed pages to the file system."""
