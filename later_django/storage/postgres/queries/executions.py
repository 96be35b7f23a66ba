"""PostgreSQL statements of execution leases: job ids as arrays, rows via ``unnest``."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.executions import LEASE_CONFLICT, LEASE_INTO, ExecutionQueries


@PostgresDriver.register
class PostgresExecutionQueries(ExecutionQueries):
    lease_insert_many = RowsStatement(
        LEASE_INTO
        + "SELECT %(namespace)s, batch.job_id, %(owner)s, batch.lease_until, batch.attempt, "
        "%(started_at)s "
        "FROM unnest(%(job_id)s::varchar[], %(lease_until)s::bigint[], %(attempt)s::int[]) "
        "AS batch(job_id, lease_until, attempt) ORDER BY batch.job_id" + LEASE_CONFLICT
    )
    lease_renew = (
        "UPDATE later_job_execution SET lease_until = %(lease_until)s "
        "WHERE namespace = %(namespace)s AND owner = %(owner)s AND job_id = ANY(%(job_ids)s) "
        "RETURNING job_id"
    )
    lease_delete_many = (
        "DELETE FROM later_job_execution WHERE namespace = %(namespace)s AND owner = %(owner)s "
        "AND job_id = ANY(%(job_ids)s)"
    )
    lease_get_many = (
        "SELECT job_id, owner, lease_until FROM later_job_execution "
        "WHERE namespace = %(namespace)s AND job_id = ANY(%(job_ids)s)"
    )
    leases_of_owners = (
        "SELECT job_id, owner, attempt, started_at, lease_until FROM later_job_execution "
        "WHERE namespace = %(namespace)s AND owner = ANY(%(owners)s) "
        "ORDER BY started_at, job_id LIMIT %(limit)s"
    )
