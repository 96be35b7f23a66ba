"""Named SQL of the delivery queue (``later_delivery_queue``, ``later_queue_depth``).

Variable-length lists are bound as one parameter: a JSON array read with
``json_each`` on SQLite, an array compared with ``= ANY`` on PostgreSQL.

The ready predicate of a claim is: due (``available_at <= now``) and either
never leased or leased with a lapsed lease (``lease_until <= now``), which is
how a claim takes back the messages of a consumer that stopped renewing.
The claim index ``later_delivery_queue_claim_idx`` is walked in claim order
(``namespace, priority DESC, sequence``) and carries the filter columns.
"""

from __future__ import annotations

from later_django.storage.db import Statements

#: The PostgreSQL channel that wakes idle workers (``LISTEN later_django``); the
#: payload is the namespace.
WAKE_CHANNEL = "later_django"

_COLUMNS = "sequence, queue_name, payload, priority, available_at, lease_owner, lease_until"

_INSERT_INTO = (
    "INSERT INTO later_delivery_queue (namespace, queue_name, payload, priority, available_at) "
)

# The claim, in one statement on both vendors. ``candidates`` is at most one
# batch in claim order; ``chosen`` keeps the whole batch when it is full and
# only the first message otherwise, so fresh consumers share a small queue.
# On PostgreSQL the statement lives in the function ``later_claim_batch``
# (migration 0003), which pins the plan to the ordered walk of the claim index
# whatever the table statistics say; its parameters are namespace, queue
# names, now, batch size, owner, lease_until.
_POSTGRES_CLAIM = f"SELECT {_COLUMNS} FROM later_claim_batch(%s, %s, %s, %s, %s, %s)"

# SQLite runs it inside BEGIN IMMEDIATE: one writer at a time, so no row locks.
_SQLITE_CLAIM = f"""
WITH candidates AS MATERIALIZED (
    SELECT sequence, priority FROM later_delivery_queue
    WHERE namespace = %s AND queue_name IN (SELECT value FROM json_each(%s))
      AND available_at <= %s AND (lease_until IS NULL OR lease_until <= %s)
    ORDER BY priority DESC, sequence
    LIMIT %s
)
UPDATE later_delivery_queue SET lease_owner = %s, lease_until = %s
WHERE sequence IN (
    SELECT sequence FROM candidates
    ORDER BY priority DESC, sequence
    LIMIT CASE WHEN (SELECT count(*) FROM candidates) >= %s THEN %s ELSE 1 END
)
RETURNING {_COLUMNS}
"""

QUEUE_SQL = Statements(
    {
        "depth_of_queue": (
            "SELECT COALESCE(SUM(ready), 0) FROM later_queue_depth "
            "WHERE namespace = %s AND queue_name = %s"
        ),
        # Params: namespace, len(prefix), prefix. ``substr`` rather than LIKE,
        # whose ``_`` wildcard would match inside the prefix ``__later``.
        "depth_of_namespace": (
            "SELECT COALESCE(SUM(ready), 0) FROM later_queue_depth "
            "WHERE namespace = %s AND substr(queue_name, 1, %s) <> %s"
        ),
    },
    sqlite={
        # SQLite has no array parameter: the batch is a VALUES list whose length
        # is the only thing that varies (see SqlRunner.execute_values).
        "publish": _INSERT_INTO + "VALUES {values} RETURNING sequence",
        "publish_values": "(%s, %s, %s, %s, %s)",
        "claim": _SQLITE_CLAIM,
        "has_ready": (
            "SELECT 1 FROM later_delivery_queue WHERE namespace = %s "
            "AND queue_name IN (SELECT value FROM json_each(%s)) AND available_at <= %s "
            "AND (lease_until IS NULL OR lease_until <= %s) LIMIT 1"
        ),
        "renew": (
            "UPDATE later_delivery_queue SET lease_until = %s "
            "WHERE lease_owner = %s AND sequence IN (SELECT value FROM json_each(%s)) "
            "RETURNING sequence"
        ),
        "ack": (
            "DELETE FROM later_delivery_queue "
            "WHERE lease_owner = %s AND sequence IN (SELECT value FROM json_each(%s))"
        ),
        "nack": (
            "UPDATE later_delivery_queue "
            "SET lease_owner = NULL, lease_until = NULL, available_at = %s "
            "WHERE lease_owner = %s AND sequence IN (SELECT value FROM json_each(%s))"
        ),
    },
    postgresql={
        # One array parameter for the whole batch; ORDER BY position makes the
        # sequences follow the order of the payloads.
        "publish": (
            _INSERT_INTO + "SELECT %s, %s, batch.payload, %s, %s "
            "FROM unnest(%s::bytea[]) WITH ORDINALITY AS batch(payload, position) "
            "ORDER BY batch.position RETURNING sequence"
        ),
        # publish's parameters, then the notification payload.
        "publish_notify": (
            "WITH published AS (" + _INSERT_INTO + "SELECT %s, %s, batch.payload, %s, %s "
            "FROM unnest(%s::bytea[]) WITH ORDINALITY AS batch(payload, position) "
            "ORDER BY batch.position RETURNING sequence) "
            "SELECT published.sequence FROM published, "
            "(SELECT pg_notify('" + WAKE_CHANNEL + "', %s)) AS woken"
        ),
        "has_ready": (
            "SELECT 1 FROM later_delivery_queue WHERE namespace = %s "
            "AND queue_name = ANY(%s) AND available_at <= %s "
            "AND (lease_until IS NULL OR lease_until <= %s) LIMIT 1"
        ),
        "claim": _POSTGRES_CLAIM,
        "renew": (
            "UPDATE later_delivery_queue SET lease_until = %s "
            "WHERE lease_owner = %s AND sequence = ANY(%s) RETURNING sequence"
        ),
        "ack": "DELETE FROM later_delivery_queue WHERE lease_owner = %s AND sequence = ANY(%s)",
        "nack": (
            "UPDATE later_delivery_queue "
            "SET lease_owner = NULL, lease_until = NULL, available_at = %s "
            "WHERE lease_owner = %s AND sequence = ANY(%s)"
        ),
    },
)
