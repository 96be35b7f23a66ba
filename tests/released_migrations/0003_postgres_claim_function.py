"""PostgreSQL: the delivery-queue claim as a function whose plan cannot collapse.

A claim is only cheap as an ordered walk of ``later_delivery_queue_claim_idx``
that stops after one batch. When the table's statistics are stale - a burst
of jobs arrives in a queue that was analysed while nearly empty, or a fresh
table before autovacuum's first ANALYZE - the planner estimates a handful of
rows and picks a bitmap scan plus a sort of *every* ready message instead:
measured at 20,000 ready messages, 5.7 ms per claim instead of 0.3 ms, and it
grows with the backlog, exactly when throughput matters most.

``later_claim_batch`` runs the same single statement with sequential and
bitmap scans disabled for its own execution only (``SET`` on the function),
so the ordered index walk is the plan whatever the statistics say. The
caller's session settings are untouched. SQLite's planner already walks the
covering index; nothing changes there.

The statement keeps the shape that did not deadlock in the prototype: the
candidates are locked ``FOR UPDATE SKIP LOCKED`` in a CTE that the ``UPDATE``
joins. With at least ``p_batch`` ready it takes ``p_batch``, else one.
"""

from django.db import migrations

from tests.released_migrations._operations import VendorSQL

CREATE_CLAIM_FUNCTION = """
CREATE FUNCTION later_claim_batch(
    p_namespace text, p_queue_names text[], p_now bigint, p_batch integer,
    p_owner text, p_lease_until bigint
) RETURNS TABLE (
    sequence bigint, queue_name varchar, payload bytea, priority integer,
    available_at bigint, lease_owner varchar, lease_until bigint
)
LANGUAGE sql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
WITH candidates AS (
    SELECT ready.sequence, ready.priority FROM later_delivery_queue AS ready
    WHERE ready.namespace = p_namespace
      AND ready.queue_name = ANY(p_queue_names)
      AND ready.available_at <= p_now
      AND (ready.lease_until IS NULL OR ready.lease_until <= p_now)
    ORDER BY ready.priority DESC, ready.sequence
    LIMIT p_batch
    FOR UPDATE SKIP LOCKED
), chosen AS (
    SELECT candidates.sequence FROM candidates
    ORDER BY candidates.priority DESC, candidates.sequence
    LIMIT CASE WHEN (SELECT count(*) FROM candidates) >= p_batch THEN p_batch ELSE 1 END
)
UPDATE later_delivery_queue AS q SET lease_owner = p_owner, lease_until = p_lease_until
FROM chosen WHERE q.sequence = chosen.sequence
RETURNING q.sequence, q.queue_name, q.payload, q.priority, q.available_at,
          q.lease_owner, q.lease_until
$$
"""


class Migration(migrations.Migration):
    dependencies = [("later_django", "0002_triggers_and_indexes")]

    operations = [
        VendorSQL(
            forwards={"sqlite": [], "postgresql": [CREATE_CLAIM_FUNCTION]},
            backwards={
                "sqlite": [],
                "postgresql": [
                    "DROP FUNCTION IF EXISTS later_claim_batch(text, text[], bigint, integer, "
                    "text, bigint)"
                ],
            },
        )
    ]
