"""SQLite statements of the delivery queue: JSON arrays, ``VALUES``, the claim in SQL."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.queries.queue import (
    COLUMNS,
    INSERT_INTO,
    QueueQueries,
    ready_head,
    served_queues,
)
from later_django.storage.sqlite import SqliteDriver

_SEQUENCES = "(SELECT value FROM json_each(%(sequences)s))"

_SERVED = served_queues(
    listed="SELECT DISTINCT value FROM json_each(%(queue_names)s)",
    every="%(queue_names)s IS NULL",
)

# A claim is one statement, run inside BEGIN IMMEDIATE: one writer at a time, so
# no row locks. ``candidates`` is at most one batch in claim order; ``_TAKE``
# leases the whole batch when it is full and only the first message otherwise,
# so fresh consumers share a small queue.
_TAKE = f"""
UPDATE later_delivery_queue
SET lease_owner = %(owner)s, lease_until = %(lease_until)s, deliveries = deliveries + 1
WHERE sequence IN (
    SELECT sequence FROM candidates
    ORDER BY priority DESC, sequence
    LIMIT CASE WHEN (SELECT count(*) FROM candidates) >= %(batch_size)s
          THEN %(batch_size)s ELSE 1 END
)
RETURNING {COLUMNS}
"""

# One queue: its head, one walk of the claim index (a tenth of the merge's time
# for a batch of 16, measured: the merge's correlated list costs more than the
# walk it bounds).
_CLAIM_ONE_QUEUE = (
    """
WITH candidates AS MATERIALIZED (
    SELECT sequence, priority FROM later_delivery_queue
    WHERE namespace = %(namespace)s AND queue_name = %(queue_name)s
      AND available_at <= %(now)s AND (lease_until IS NULL OR lease_until <= %(now)s)
    ORDER BY priority DESC, sequence
    LIMIT %(batch_size)s
)"""
    + _TAKE
)

# Several queues, or every queue: at most a batch of each served queue's head,
# merged in claim order.
_CLAIM = (
    f"""
WITH RECURSIVE {_SERVED}, candidates AS MATERIALIZED (
    SELECT ready.sequence, ready.priority
    FROM served JOIN later_delivery_queue AS ready
      ON ready.sequence IN ({ready_head("%(batch_size)s")})
    ORDER BY ready.priority DESC, ready.sequence
    LIMIT %(batch_size)s
)"""
    + _TAKE
)


@SqliteDriver.register
class SqliteQueueQueries(QueueQueries):
    # No array parameter: the batch is a VALUES list whose length is the only
    # thing that varies (SqliteDriver.execute_rows).
    publish = RowsStatement(
        INSERT_INTO + "VALUES {values} RETURNING sequence",
        row="(%(namespace)s, %(queue_name)s, %(payload)s, %(priority)s, %(available_at)s)",
    )
    # No LISTEN on SQLite: idle workers poll, so the notification is dropped.
    publish_notify = publish
    claim = _CLAIM
    claim_one_queue = _CLAIM_ONE_QUEUE
    has_ready = (
        f"WITH RECURSIVE {_SERVED} SELECT 1 FROM served WHERE EXISTS ({ready_head('1')}) LIMIT 1"
    )
    renew = (
        "UPDATE later_delivery_queue SET lease_until = %(lease_until)s "
        "WHERE lease_owner = %(owner)s AND sequence IN " + _SEQUENCES + " RETURNING sequence"
    )
    ack = (
        "DELETE FROM later_delivery_queue "
        "WHERE lease_owner = %(owner)s AND sequence IN " + _SEQUENCES
    )
    nack = (
        "UPDATE later_delivery_queue "
        "SET lease_owner = NULL, lease_until = NULL, available_at = %(available_at)s, "
        "deliveries = max(deliveries - 1, 0) "
        "WHERE lease_owner = %(owner)s AND sequence IN " + _SEQUENCES
    )
