"""SQLite statements of execution leases: job ids as JSON arrays, rows as ``VALUES``."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.queries.executions import LEASE_CONFLICT, LEASE_INTO, ExecutionQueries
from later_django.storage.sqlite import SqliteDriver

_JOB_IDS = "(SELECT value FROM json_each(%(job_ids)s))"
_OWNERS = "(SELECT value FROM json_each(%(owners)s))"


@SqliteDriver.register
class SqliteExecutionQueries(ExecutionQueries):
    lease_insert_many = RowsStatement(
        LEASE_INTO + "VALUES {values}" + LEASE_CONFLICT,
        row=(
            "(%(namespace)s, %(job_id)s, %(owner)s, %(lease_until)s, %(attempt)s, %(started_at)s)"
        ),
    )
    lease_renew = (
        "UPDATE later_job_execution SET lease_until = %(lease_until)s "
        "WHERE namespace = %(namespace)s AND owner = %(owner)s AND job_id IN " + _JOB_IDS + " "
        "RETURNING job_id"
    )
    lease_delete_many = (
        "DELETE FROM later_job_execution WHERE namespace = %(namespace)s AND owner = %(owner)s "
        "AND job_id IN " + _JOB_IDS
    )
    lease_get_many = (
        "SELECT job_id, owner, lease_until FROM later_job_execution "
        "WHERE namespace = %(namespace)s AND job_id IN " + _JOB_IDS
    )
    leases_of_owners = (
        "SELECT job_id, owner, attempt, started_at, lease_until FROM later_job_execution "
        "WHERE namespace = %(namespace)s AND owner IN " + _OWNERS + " "
        "ORDER BY started_at, job_id LIMIT %(limit)s"
    )
