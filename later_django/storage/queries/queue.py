"""Statements of the delivery queue (``later_delivery_queue``, ``later_queue_depth``).

Variable-length lists (``queue_names``, ``sequences``) are one bound parameter.

The ready predicate of a claim is: due (``available_at <= now``) and either
never leased or leased with a lapsed lease (``lease_until <= now``), which is
how a claim takes back the messages of a consumer that stopped renewing. A
claim adds one to ``deliveries`` and a hand-back takes it away again (migration
0014), so the count says how many claims ended without an ack or a hand-back.
The claim index ``later_delivery_queue_claim_idx`` is walked in claim order
(``namespace, priority DESC, sequence``) and carries the filter columns.
"""

from __future__ import annotations

from later_django.storage.driver import RowsStatement

#: The PostgreSQL channel that wakes idle workers (``LISTEN later_django``); the
#: payload is the namespace. Statements bind it as the parameter ``channel``.
WAKE_CHANNEL = "later_django"

COLUMNS = (
    "sequence, queue_name, payload, priority, available_at, lease_owner, lease_until, deliveries"
)

INSERT_INTO = (
    "INSERT INTO later_delivery_queue (namespace, queue_name, payload, priority, available_at) "
)


class QueueQueries:
    """Delivery queue statements; see the module docstring for the ready predicate."""

    # An operator's delete of a queued job's message: only while nobody holds it.
    delete_unclaimed = (
        "DELETE FROM later_delivery_queue WHERE sequence = %(sequence)s AND lease_until IS NULL"
    )
    depth_of_queue = (
        "SELECT COALESCE(SUM(ready), 0) FROM later_queue_depth "
        "WHERE namespace = %(namespace)s AND queue_name = %(queue_name)s"
    )
    depth_of_namespace = (
        "SELECT COALESCE(SUM(ready), 0) FROM later_queue_depth WHERE namespace = %(namespace)s"
    )

    # Spelled per vendor.
    #: Rows of (payload) in payload order; shared namespace, queue_name, priority,
    #: available_at. Returns the new sequences.
    publish: RowsStatement
    #: ``publish`` that also sends ``pg_notify(%(channel)s, %(notify)s)``, delivered at
    #: commit (a vendor without notifications publishes only).
    publish_notify: RowsStatement
    #: (namespace, queue_names, now, batch_size, owner, lease_until) -> COLUMNS rows;
    #: ``queue_names`` NULL: every queue.
    claim: str
    #: (namespace, queue_names, now) -> a row when a claim would find a message;
    #: ``queue_names`` NULL: every queue.
    has_ready: str
    #: (lease_until, owner, sequences) -> the sequences still held.
    renew: str
    #: (owner, sequences)
    ack: str
    #: (available_at, owner, sequences); takes back the claim's delivery.
    nack: str
    #: (channel, namespace): the final ``SELECT`` of a combined write that wakes the
    #: listening workers; only drivers that combine statements (PostgreSQL) have it.
    wake_tail: str
