"""The ``wal_checkpoint`` pass (every 5 s, SQLite): truncates a write-ahead log over
32,768 frames.

This module is the one place that decides when to checkpoint: how often to
look, the size that calls for truncating, how long to wait for readers, and
the back-off after giving up. :meth:`UpkeepStore.checkpoint_wal_above
<later_django.storage.upkeep.UpkeepStore.checkpoint_wal_above>` only runs the
checkpoint it is asked for.
"""

from __future__ import annotations

import logging

from later_django.maintenance.definition import MaintenancePass, PassContext
from later_django.storage.types import WalCheckpoint

logger = logging.getLogger("later_django.maintenance")

#: Least time between two looks at the log size (the pass's interval).
WAL_CHECK_INTERVAL_MS = 5_000
#: Log size in frames (4 KiB pages, about 128 MB) at which a truncating checkpoint is tried.
WAL_CHECKPOINT_FRAMES = 32_768
#: How long a truncating checkpoint waits for readers. Writers wait behind it for as long,
#: so in-flight reads can finish and no new one starts; it must outlast the slowest read
#: on a loaded host (a 2 s wait gave up every time on a CPU-throttled container).
WAL_TRUNCATE_WAIT_MS = 15_000
#: Back-off after a truncating checkpoint gave up, so a database that is never idle is
#: not stalled for the full wait over and over.
WAL_RETRY_AFTER_BUSY_MS = 15_000


def keeps_a_database_file(context: PassContext) -> bool:
    """Whether later_django must look after the database file itself: its write-ahead
    log and free pages. True for the driver whose database is one file behind one
    write lock (SQLite); a server database recycles its log and vacuums on its own,
    so there the file passes take no lease at all."""
    return context.stores.driver.serializes_writes


def checkpoint_wal(context: PassContext) -> int:
    """A passive checkpoint, then a truncating one (waiting at most
    ``WAL_TRUNCATE_WAIT_MS`` for readers) when the log holds ``WAL_CHECKPOINT_FRAMES``
    frames or more. After giving up, no process tries again for
    ``WAL_RETRY_AFTER_BUSY_MS``. Returns 1 when the log was truncated, else 0
    (also where there is no log to truncate: PostgreSQL, SQLite outside WAL mode)."""
    outcome = context.stores.upkeep.checkpoint_wal_above(
        WAL_CHECKPOINT_FRAMES, WAL_TRUNCATE_WAIT_MS
    )
    if outcome is WalCheckpoint.TRUNCATED:
        logger.info("truncated the SQLite write-ahead log of database %r", context.using)
        return 1
    if outcome is WalCheckpoint.GAVE_UP:
        logger.info(
            "a reader kept the write-ahead log of database %r from truncating; retrying in %d ms",
            context.using,
            WAL_RETRY_AFTER_BUSY_MS,
        )
        context.defer(WAL_RETRY_AFTER_BUSY_MS / 1000)
    return 0


WAL_CHECKPOINT = MaintenancePass(
    "wal_checkpoint",
    WAL_CHECK_INTERVAL_MS / 1000,
    checkpoint_wal,
    # The truncating checkpoint may wait this long for readers.
    max_run_seconds=WAL_TRUNCATE_WAIT_MS / 1000 + 5.0,
    wanted=keeps_a_database_file,
    unit=("log truncated", "logs truncated"),
)
