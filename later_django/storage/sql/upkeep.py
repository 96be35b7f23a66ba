"""Named SQL of whole-database upkeep: size, sweep of expired rows, WAL checkpoints, vacuum.

The sweeps delete through a bounded sub-select on the partial indexes
``later_storage_expire_idx`` / ``later_storage_range_expire_idx`` (both
``WHERE date_expire IS NOT NULL``), so one call touches at most ``limit`` rows.
"""

from __future__ import annotations

from later_django.storage.db import Statements

#: SQLite keeps ``busy_timeout`` in a C int of milliseconds.
MAX_BUSY_TIMEOUT_MS = 2_147_483_647

STATEMENTS = Statements(
    {
        # (now, limit)
        "sweep_expired_values": (
            "DELETE FROM later_storage WHERE key IN ("
            "SELECT key FROM later_storage "
            "WHERE date_expire IS NOT NULL AND date_expire <= %s LIMIT %s)"
        ),
        # (now, limit)
        "sweep_expired_range_members": (
            "DELETE FROM later_storage_range WHERE sequence IN ("
            "SELECT sequence FROM later_storage_range "
            "WHERE date_expire IS NOT NULL AND date_expire <= %s LIMIT %s)"
        ),
    },
    sqlite={
        "total_db_size_bytes": (
            "SELECT (SELECT page_count FROM pragma_page_count()) "
            "* (SELECT page_size FROM pragma_page_size())"
        ),
        # -> (busy, log frames, checkpointed frames); log frames is -1 outside WAL mode.
        "wal_checkpoint_passive": "PRAGMA wal_checkpoint(PASSIVE)",
        "wal_checkpoint_truncate": "PRAGMA wal_checkpoint(TRUNCATE)",
        "busy_timeout": "PRAGMA busy_timeout",
        "vacuum": "VACUUM",
    },
    postgresql={
        "total_db_size_bytes": "SELECT pg_database_size(current_database())",
    },
)


def set_busy_timeout(milliseconds: int) -> str:
    """``PRAGMA busy_timeout = <milliseconds>`` for SQLite.

    The one statement here that carries a value in its text: a PRAGMA takes no
    bound parameters. The value must be an ``int`` in SQLite's range, so the
    text can only ever be this PRAGMA with a number.
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
