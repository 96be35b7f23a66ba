"""MySQL/MariaDB statements of the dashboard's reads: the shared ones but two."""

from __future__ import annotations

from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.dashboard import DashboardQueries, oldest_ready


@MysqlDriver.register
class MysqlDashboardQueries(DashboardQueries):
    # The queue's primary key walked in sequence order, so the first ready message ends
    # the read (MariaDB picked it unhinted too: the hint keeps it so).
    oldest_ready = oldest_ready("later_delivery_queue FORCE INDEX (PRIMARY)")
    # ``DIV``: MySQL has no ``CAST(... AS INTEGER)`` and its ``/`` divides in decimals.
    transitions_per_slot = (
        "SELECT minute_bucket DIV %(slot_minutes)s AS slot, SUM(count), MAX(count)"
        " FROM later_job_transition_metrics"
        " WHERE namespace = %(namespace)s AND stage = %(stage)s"
        " AND minute_bucket >= %(first_bucket)s AND minute_bucket <= %(last_bucket)s"
        " GROUP BY slot ORDER BY slot"
    )
