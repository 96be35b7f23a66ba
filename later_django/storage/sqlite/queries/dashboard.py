"""SQLite statements of the dashboard's reads."""

from __future__ import annotations

from later_django.storage.queries.dashboard import DashboardQueries, oldest_ready
from later_django.storage.sqlite import SqliteDriver


@SqliteDriver.register
class SqliteDashboardQueries(DashboardQueries):
    # Walk the queue in rowid order so the first ready message ends the read;
    # SQLite would otherwise take the claim index and sort the namespace.
    oldest_ready = oldest_ready("later_delivery_queue NOT INDEXED")
