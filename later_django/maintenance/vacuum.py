"""The ``vacuum`` pass (``LATER["VACUUM_INTERVAL"]``, off by default): SQLite ``VACUUM``."""

from __future__ import annotations

from later_django.conf import LaterSettings
from later_django.maintenance.definition import MaintenancePass, PassContext
from later_django.maintenance.wal_checkpoint import keeps_a_database_file


def vacuum_interval(settings: LaterSettings) -> float | None:
    """``VACUUM_INTERVAL`` in seconds; ``None`` (the default) switches the pass off."""
    return settings.vacuum_interval_seconds


def vacuum(context: PassContext) -> int:
    """Returns the file's free pages to the file system (SQLite ``VACUUM``, which rebuilds
    the file under an exclusive lock). Returns 1 when it vacuumed, 0 where the database
    vacuums itself (PostgreSQL's autovacuum)."""
    if not keeps_a_database_file(context):
        return 0
    context.stores.upkeep.vacuum()
    return 1


VACUUM = MaintenancePass(
    "vacuum",
    86_400.0,
    vacuum,
    # VACUUM cannot be interrupted: the lease must outlast a big file's rebuild.
    max_run_seconds=3_600.0,
    interval_from_settings=vacuum_interval,
    wanted=keeps_a_database_file,
    unit=("file vacuumed", "files vacuumed"),
)
