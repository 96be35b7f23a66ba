"""PostgreSQL statements of the delivery queue: arrays, ``unnest``, the claim function."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.postgres import PostgresDriver
from later_django.storage.queries.queue import (
    COLUMNS,
    INSERT_INTO,
    QueueQueries,
    ready_head,
    served_queues,
)

# One array parameter for the whole batch; ORDER BY position makes the
# sequences follow the order of the payloads.
_PUBLISH = (
    INSERT_INTO + "SELECT %(namespace)s, %(queue_name)s, batch.payload, %(priority)s, "
    "%(available_at)s "
    "FROM unnest(%(payload)s::bytea[]) WITH ORDINALITY AS batch(payload, position) "
    "ORDER BY batch.position RETURNING sequence"
)

_SERVED = served_queues(
    listed="SELECT DISTINCT listed FROM unnest(%(queue_names)s::text[]) AS listed",
    every="%(queue_names)s::text[] IS NULL",
)


@PostgresDriver.register
class PostgresQueueQueries(QueueQueries):
    publish = RowsStatement(
        _PUBLISH,
        one=INSERT_INTO + "VALUES (%(namespace)s, %(queue_name)s, %(payload)s, %(priority)s, "
        "%(available_at)s) RETURNING sequence",
    )
    publish_notify = RowsStatement(
        "WITH published AS (" + _PUBLISH + ") "
        "SELECT published.sequence FROM published, "
        "(SELECT pg_notify(%(channel)s, %(notify)s)) AS woken"
    )
    # The claim lives in the function ``later_claim_batch`` (migration 0003),
    # which pins the plan to the ordered walk of the claim index whatever the
    # table statistics say. ``candidates`` is at most one batch in claim order;
    # ``chosen`` keeps the whole batch when it is full and only the first
    # message otherwise, so fresh consumers share a small queue; ``FOR UPDATE
    # SKIP LOCKED`` keeps concurrent claimers off each other's rows. A NULL
    # ``queue_names`` claims from every queue (migration 0006). Since 0008 the
    # claim is ``later_claim_with_records``: the same claim, plus the key and live
    # value of the job record each message's payload names (a hint; see 0008);
    # since 0014 ``later_claim_counted``, which also counts the delivery; since
    # 0016 it walks the head of each served queue and merges them in claim order.
    claim = (
        f"SELECT {COLUMNS}, record_key, record FROM later_claim_counted(%(namespace)s, "
        "%(queue_names)s, %(now)s, %(batch_size)s, %(owner)s, %(lease_until)s)"
    )
    # The function plans one head as cheaply as it merges several.
    claim_one_queue = claim
    # Each served queue's own head, as the claim reads it (migration 0016). A
    # lateral rather than EXISTS: the planner may turn EXISTS into a hash join
    # that reads every row of the namespace; a lateral is probed per queue.
    has_ready = (
        f"WITH RECURSIVE {_SERVED} SELECT 1 FROM served "
        f"CROSS JOIN LATERAL ({ready_head('1')}) AS ready LIMIT 1"
    )
    renew = (
        "UPDATE later_delivery_queue SET lease_until = %(lease_until)s "
        "WHERE lease_owner = %(owner)s AND sequence = ANY(%(sequences)s) RETURNING sequence"
    )
    ack = (
        "DELETE FROM later_delivery_queue "
        "WHERE lease_owner = %(owner)s AND sequence = ANY(%(sequences)s)"
    )
    nack = (
        "UPDATE later_delivery_queue "
        "SET lease_owner = NULL, lease_until = NULL, available_at = %(available_at)s, "
        "deliveries = GREATEST(deliveries - 1, 0) "
        "WHERE lease_owner = %(owner)s AND sequence = ANY(%(sequences)s)"
    )
    wake_tail = "SELECT pg_notify(%(channel)s, %(namespace)s)"
