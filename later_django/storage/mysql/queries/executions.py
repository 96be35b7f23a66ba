"""MySQL/MariaDB statements of execution leases and worker heartbeats: job ids and
owners as JSON arrays read with ``JSON_TABLE``, a start's rows as derived ``UNION ALL``
rows under ``ON DUPLICATE KEY UPDATE``, and the renew as an update then a read.

A bounded purge is ``DELETE ... LIMIT`` (MySQL refuses ``LIMIT`` in an ``IN``
subquery, and would refuse a subquery on the table being deleted from).
"""

from __future__ import annotations

from later_django.storage.driver import Returning, RowsStatement
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.executions import LEASE_INTO, ExecutionQueries


def _ids_table(name: str) -> str:
    """The JSON array ``%(<name>)s`` as the rows of ``j.v``, compared byte by byte as
    the ``utf8mb4_bin`` id columns are."""
    return (
        f"JSON_TABLE(%({name})s, '$[*]' COLUMNS (v VARCHAR(200) COLLATE utf8mb4_bin PATH '$')) AS j"
    )


_JOB_IDS = "(SELECT v FROM " + _ids_table("job_ids") + ")"
_OWNERS = "(SELECT v FROM " + _ids_table("owners") + ")"
_UNION = " UNION ALL "
#: The leases of the ids, one probe of the primary key each: the order and the index
#: written out (left to itself, MariaDB read a small namespace's leases by another
#: index first, and a write then locked every one of them).
_LEASES_OF_IDS = (
    _ids_table("job_ids") + " STRAIGHT_JOIN later_job_execution AS e FORCE INDEX (PRIMARY) "
    "ON e.namespace = %(namespace)s AND e.job_id = j.v"
)


@MysqlDriver.register
class MysqlExecutionQueries(ExecutionQueries):
    # The parameters repeat in the update (no ``excluded`` row on MySQL).
    worker_heartbeat = (
        "INSERT INTO later_worker (namespace, worker_id, host, pid, concurrency, queues, "
        "busy, busy_queues, started_at, heartbeat_at) VALUES (%(namespace)s, %(worker_id)s, "
        "%(host)s, %(pid)s, %(concurrency)s, %(queues)s, %(busy)s, %(busy_queues)s, "
        "%(started_at)s, %(heartbeat_at)s) "
        "ON DUPLICATE KEY UPDATE busy = %(busy)s, busy_queues = %(busy_queues)s, "
        "heartbeat_at = %(heartbeat_at)s"
    )
    worker_purge_dead = (
        "DELETE FROM later_worker WHERE namespace = %(namespace)s "
        "AND heartbeat_at < %(before)s LIMIT %(limit)s"
    )
    # The lapsed leases, oldest first along the lease index, each checked against its
    # job's index row (another table: MySQL allows that subquery in a DELETE).
    lease_purge_dead = (
        "DELETE FROM later_job_execution WHERE namespace = %(namespace)s "
        "AND lease_until < %(before)s AND NOT EXISTS ("
        "SELECT 1 FROM later_jobs_index AS job "
        "WHERE job.namespace = later_job_execution.namespace "
        "AND job.job_id = later_job_execution.job_id AND job.stage = 'running') "
        "ORDER BY lease_until LIMIT %(limit)s"
    )
    lease_insert_many = RowsStatement(
        LEASE_INTO + "SELECT %(namespace)s, new.job_id, %(owner)s, new.lease_until, "
        "new.attempt, %(started_at)s FROM ("
        "SELECT NULL AS job_id, NULL AS lease_until, NULL AS attempt FROM DUAL WHERE FALSE"
        + _UNION
        + "{values}) AS new "
        "ON DUPLICATE KEY UPDATE owner = %(owner)s, lease_until = new.lease_until, "
        "attempt = new.attempt, started_at = %(started_at)s",
        row="SELECT %(job_id)s, %(lease_until)s, %(attempt)s",
        joiner=_UNION,
    )
    # The update locks the owner's rows (JSON_TABLE drives the join, one primary-key
    # probe per id); the read returns those it extended, which no one else can
    # change before this transaction ends.
    lease_renew = Returning(
        [
            "UPDATE " + _LEASES_OF_IDS + " SET e.lease_until = %(lease_until)s "
            "WHERE e.owner = %(owner)s"
        ],
        "SELECT job_id FROM later_job_execution WHERE namespace = %(namespace)s "
        "AND owner = %(owner)s AND lease_until = %(lease_until)s AND job_id IN " + _JOB_IDS,
    )
    lease_delete_many = "DELETE e FROM " + _LEASES_OF_IDS + " WHERE e.owner = %(owner)s"
    lease_get_many = (
        "SELECT job_id, owner, lease_until FROM later_job_execution "
        "WHERE namespace = %(namespace)s AND job_id IN " + _JOB_IDS
    )
    leases_of_owners = (
        "SELECT job_id, owner, attempt, started_at, lease_until FROM later_job_execution "
        "WHERE namespace = %(namespace)s AND owner IN " + _OWNERS + " "
        "ORDER BY started_at, job_id LIMIT %(limit)s"
    )
