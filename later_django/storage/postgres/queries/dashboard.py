"""PostgreSQL statements of the dashboard's reads."""

from __future__ import annotations

from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.dashboard import DashboardQueries, oldest_ready


@PostgresDriver.register
class PostgresDashboardQueries(DashboardQueries):
    oldest_ready = oldest_ready("later_delivery_queue")
