"""Statements of the delivery queue (``later_delivery_queue``, ``later_queue_depth``).

Variable-length lists (``queue_names``, ``sequences``) are one bound parameter.

The ready predicate of a claim is: due (``available_at <= now``) and either
never leased or leased with a lapsed lease (``lease_until <= now``), which is
how a claim takes back the messages of a consumer that stopped renewing. A
claim adds one to ``deliveries`` and a hand-back takes it away again (migration
0014), so the count says how many claims ended without an ack or a hand-back.
The claim index ``later_delivery_queue_claim_idx`` is led by the queue
(``namespace, queue_name, priority DESC, sequence``, migration 0016) and carries
the filter columns: a claim walks the head of each queue it serves in claim
order and merges them, so what other queues hold is never read.
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


def served_queues(*, listed: str, every: str) -> str:
    """The CTEs ``every_queue`` and ``served`` (one column ``queue_name``) of a
    ``WITH RECURSIVE``: the names ``listed`` selects, or, where ``every`` is true
    (``queue_names`` NULL), each queue name of the namespace, found by a skip
    scan of the claim index (one index descent per distinct name)."""
    return f"""
every_queue(queue_name) AS (
    SELECT (SELECT lowest.queue_name FROM later_delivery_queue AS lowest
            WHERE lowest.namespace = %(namespace)s AND {every}
            ORDER BY lowest.queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT next_name.queue_name FROM later_delivery_queue AS next_name
            WHERE next_name.namespace = %(namespace)s
              AND next_name.queue_name > every_queue.queue_name
            ORDER BY next_name.queue_name LIMIT 1)
    FROM every_queue WHERE every_queue.queue_name IS NOT NULL
), served(queue_name) AS (
    {listed}
    UNION ALL
    SELECT every_queue.queue_name FROM every_queue WHERE every_queue.queue_name IS NOT NULL
)"""


def ready_head(limit: str) -> str:
    """The sequences of ``served.queue_name``'s ready messages in claim order, at
    most ``limit``: one walk of the claim index from that queue's head, which
    reads only its own leased and not yet due rows besides."""
    return f"""
    SELECT head.sequence FROM later_delivery_queue AS head
    WHERE head.namespace = %(namespace)s AND head.queue_name = served.queue_name
      AND head.available_at <= %(now)s
      AND (head.lease_until IS NULL OR head.lease_until <= %(now)s)
    ORDER BY head.priority DESC, head.sequence
    LIMIT {limit}"""


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
    #: ``claim`` of the one queue ``queue_name`` (also given as ``queue_names``): the
    #: same rows, where a vendor has a cheaper statement for one head than the merge.
    claim_one_queue: str
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
