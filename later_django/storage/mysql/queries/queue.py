"""MySQL/MariaDB statements of the delivery queue: a multi-row ``VALUES`` whose ids are
the sequences, the claim in steps, and lists through ``JSON_TABLE``.

**Publish** is SQLite's ``INSERT ... VALUES {values}`` without ``RETURNING``: the
driver answers the sequences from the ids the insert took (``RowsStatement.auto_ids``;
consecutive under ``innodb_autoinc_lock_mode`` 0 and 1, one ``INSERT`` per row under 2:
``MysqlDriver.auto_increment``).

**The claim** is :class:`~later_django.storage.queue.ClaimSteps`: each served queue's
head walked down the claim index in claim order (``FORCE INDEX``: the plan must not
depend on the table's statistics) and locked ``FOR UPDATE SKIP LOCKED``, several
queues as parenthesised ``UNION ALL`` parts (``queue_name IN (...)`` reads every
candidate of those queues and sorts them, locking them all: a second claimer then
finds nothing), merged and chosen by the store, then one ``UPDATE`` joined to the
chosen sequences. READ COMMITTED (system check E022) takes no gap locks, and a
claimer skips the rows another holds, so claimers never wait on each other's queue
rows. MariaDB 10.11 keeps, until the claim commits, its lock on every row the walk
passed and rejected (the leased messages at the head: a secondary-index locking read
does not release them, READ COMMITTED notwithstanding; a primary-key walk does):
another claimer skips those too, and their owner's renew, ack or nack waits for that
commit (decision 233).

A claim of every queue finds the names in ``later_queue_depth`` (its triggers add a
row for every queue a message is published to, and keep it at 0 once empty; nothing
deletes them), keeping those whose head holds a ready message: MariaDB does not seek
in the skip scan of the other vendors (its correlated ``queue_name > ?`` reads the
whole namespace at every step). The claimed messages carry no record (as on SQLite):
the start reads it.

Lists in writes are multi-table ``UPDATE``/``DELETE`` driven by ``JSON_TABLE``
(``_SEQUENCES_JOIN``: the join order and the primary key pinned, so the store's
ascending sequences are the lock order and no other row is read); ``renew`` is a
:class:`~later_django.storage.driver.Returning` whose read finds the leases the
``UPDATE`` just set.
"""

from __future__ import annotations

from later_django.storage.driver import Returning, RowsStatement
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.queue import INSERT_INTO, QueueQueries
from later_django.storage.queue import HEAD_COLUMNS, ClaimSteps

#: The claim index of migration 0019: (namespace, queue_name, priority DESC, sequence,
#: available_at), which serves ``ORDER BY priority DESC, sequence`` within a queue.
CLAIM_INDEX = "later_delivery_queue FORCE INDEX (later_delivery_queue_claim_idx)"

#: The messages of ``%(sequences)s`` (a JSON array, ascending) as ``q``, joined to the
#: rows of ``j.s`` in that order, one primary-key lookup each. Both pinned: the join
#: order and the index. Left to itself, on a table whose statistics count a handful
#: of rows (a queue drained, or just flushed), the optimizer reads ``q`` in full,
#: locking every row in a write: two claimers, each holding its own candidates,
#: then deadlocked in their UPDATEs (tests/storage/test_mysql_queue.py).
_SEQUENCES_JOIN = (
    "JSON_TABLE(%(sequences)s, '$[*]' COLUMNS (s BIGINT PATH '$')) AS j "
    "STRAIGHT_JOIN later_delivery_queue AS q FORCE INDEX (PRIMARY) ON q.sequence = j.s"
)

_READY = (
    "available_at <= %(now)s AND (lease_until IS NULL OR lease_until <= %(now)s) "
    "ORDER BY priority DESC, sequence"
)

#: One queue's ready messages in claim order, at most a batch, locked.
_HEAD = (
    f"SELECT {HEAD_COLUMNS} FROM {CLAIM_INDEX} "
    "WHERE namespace = %(namespace)s AND queue_name = %(queue_name)s AND "
    + _READY
    + " LIMIT %(batch_size)s FOR UPDATE SKIP LOCKED"
)


def _first_ready(queue_name: str) -> str:
    """A scalar subquery: the sequence of ``queue_name``'s (an outer column's) first
    ready message, or NULL. A scalar subquery keeps the walk per queue: as ``EXISTS``
    MariaDB turns it into a semi-join that reads every row of the namespace."""
    return (
        f"(SELECT sequence FROM {CLAIM_INDEX} "
        f"WHERE namespace = %(namespace)s AND queue_name = {queue_name} AND " + _READY + " LIMIT 1)"
    )


#: Every queue name of the namespace that ever held a message (its counter rows).
_EVERY_QUEUE = (
    "SELECT DISTINCT queue_name AS q FROM later_queue_depth WHERE namespace = %(namespace)s"
)
_LISTED = (
    "SELECT q FROM JSON_TABLE(%(queue_names)s, "
    "'$[*]' COLUMNS (q VARCHAR(200) COLLATE utf8mb4_bin PATH '$')) AS listed"
)


@MysqlDriver.register
class MysqlQueueQueries(QueueQueries):
    publish = RowsStatement(
        INSERT_INTO + "VALUES {values}",
        row="(%(namespace)s, %(queue_name)s, %(payload)s, %(priority)s, %(available_at)s)",
        auto_ids=True,
    )
    # No notifications (the worker polls): the notification is dropped.
    publish_notify = publish
    claim = ClaimSteps(
        head=_HEAD,
        take=(
            "UPDATE " + _SEQUENCES_JOIN + " "
            "SET q.lease_owner = %(owner)s, q.lease_until = %(lease_until)s, "
            "q.deliveries = q.deliveries + 1"
        ),
        served="SELECT d.q FROM (" + _EVERY_QUEUE + ") AS d "
        "WHERE " + _first_ready("d.q") + " IS NOT NULL",
    )
    claim_one_queue = claim
    # The listed queues, or (queue_names NULL) every queue: the first with a ready
    # message ends the read.
    has_ready = (
        "SELECT 1 FROM ("
        + _LISTED.replace("%(queue_names)s", "COALESCE(%(queue_names)s, '[]')")
        + " UNION ALL "
        + _EVERY_QUEUE
        + " AND %(queue_names)s IS NULL) AS served "
        "WHERE " + _first_ready("served.q") + " IS NOT NULL LIMIT 1"
    )
    # The UPDATE locks the owner's rows; the read returns those holding the new lease.
    renew = Returning(
        [
            "UPDATE " + _SEQUENCES_JOIN + " "
            "SET q.lease_until = %(lease_until)s WHERE q.lease_owner = %(owner)s"
        ],
        "SELECT q.sequence FROM " + _SEQUENCES_JOIN + " "
        "WHERE q.lease_owner = %(owner)s AND q.lease_until = %(lease_until)s",
    )
    ack = "DELETE q FROM " + _SEQUENCES_JOIN + " WHERE q.lease_owner = %(owner)s"
    nack = (
        "UPDATE " + _SEQUENCES_JOIN + " "
        "SET q.lease_owner = NULL, q.lease_until = NULL, q.available_at = %(available_at)s, "
        "q.deliveries = GREATEST(q.deliveries - 1, 0) "
        "WHERE q.lease_owner = %(owner)s"
    )
    # wake_tail: none, as on SQLite (combines_statements is False and no statement
    # notifies: nothing asks for it).
