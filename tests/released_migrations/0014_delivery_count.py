"""``later_delivery_queue.deliveries``: how many times a message was claimed and
not handed back, counted by the claim itself (decision 112).

A worker hands a claimed job to its thread before the start write (record
``running``, attempt counted, execution lease) has committed, so that write's round
trip is no longer part of a job's start latency. A job that kills its process in
that window leaves no attempt in its record; its message does: the claim counted
the delivery in the same statement that leased it. The next claim sees more than
one delivery on a message whose job is still ``enqueued`` and records the lost
attempt (``WorkerLost``) before anything else, so a poison job fails after its
retries instead of being delivered again and again as attempt 1. A hand-back
(``nack``: a start that could not be planned, a job another worker still runs, the
shutdown timeout) takes its delivery back.

The column is unindexed, so the claim's and hand-back's updates stay HOT on
PostgreSQL (migration 0007). It is added with a constant default by ``ALTER TABLE
… ADD COLUMN`` on both vendors: no table rewrite on PostgreSQL 11+, and no table
rebuild on SQLite (Django's own ``AddField`` would rebuild the table there, which
drops its triggers).

``later_claim_counted`` is ``later_claim_with_records`` (migration 0008) with the
count: the same candidates, pinned plan, batch-or-one rule, lease and record read,
plus ``deliveries = deliveries + 1`` and the new count returned. The older claim
functions stay for workers of earlier releases (they count nothing, which the new
rule reads as "not delivered"). Reverse: the function and the column are dropped.
"""

from django.db import migrations, models

from tests.released_migrations._operations import VendorSQL

ADD_COLUMN = "ALTER TABLE later_delivery_queue ADD COLUMN deliveries integer NOT NULL DEFAULT 0"
DROP_COLUMN = "ALTER TABLE later_delivery_queue DROP COLUMN deliveries"

CREATE_CLAIM_COUNTED = r"""
CREATE FUNCTION later_claim_counted(
    p_namespace text, p_queue_names text[], p_now bigint, p_batch integer,
    p_owner text, p_lease_until bigint
) RETURNS TABLE (
    sequence bigint, queue_name varchar, payload bytea, priority integer,
    available_at bigint, lease_owner varchar, lease_until bigint, deliveries integer,
    record_key text, record bytea
)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH candidates AS (
    SELECT ready.sequence, ready.priority FROM later_delivery_queue AS ready
    WHERE ready.namespace = p_namespace
      AND (p_queue_names IS NULL OR ready.queue_name = ANY(p_queue_names))
      AND ready.available_at <= p_now
      AND (ready.lease_until IS NULL OR ready.lease_until <= p_now)
    ORDER BY ready.priority DESC, ready.sequence
    LIMIT p_batch
    FOR UPDATE SKIP LOCKED
), chosen AS (
    SELECT candidates.sequence FROM candidates
    ORDER BY candidates.priority DESC, candidates.sequence
    LIMIT CASE WHEN (SELECT count(*) FROM candidates) >= p_batch THEN p_batch ELSE 1 END
), claimed AS (
    UPDATE later_delivery_queue AS q
    SET lease_owner = p_owner, lease_until = p_lease_until, deliveries = q.deliveries + 1
    FROM chosen WHERE q.sequence = chosen.sequence
    RETURNING q.sequence AS c_sequence, q.queue_name AS c_queue_name, q.payload AS c_payload,
              q.priority AS c_priority, q.available_at AS c_available_at,
              q.lease_owner AS c_lease_owner, q.lease_until AS c_lease_until,
              q.deliveries AS c_deliveries
), keyed AS (
    SELECT claimed.*,
           -- CASE tries its branches in order: no get_byte past the end.
           CASE
               WHEN length(claimed.c_payload) < 12 THEN NULL
               WHEN substring(claimed.c_payload FROM 1 FOR 10)
                    <> '\x83a163a36a6f62a26964'::bytea THEN NULL
               WHEN get_byte(claimed.c_payload, 10) NOT BETWEEN 161 AND 191 THEN NULL
               WHEN length(claimed.c_payload) < 11 + get_byte(claimed.c_payload, 10) - 160
                   THEN NULL
               ELSE p_namespace || '-job-' || encode(
                   substring(claimed.c_payload FROM 12 FOR get_byte(claimed.c_payload, 10) - 160),
                   'escape'
               )
           END AS c_record_key
    FROM claimed
)
SELECT keyed.c_sequence, keyed.c_queue_name, keyed.c_payload, keyed.c_priority,
       keyed.c_available_at, keyed.c_lease_owner, keyed.c_lease_until, keyed.c_deliveries,
       keyed.c_record_key, stored.value
FROM keyed LEFT JOIN later_storage AS stored
  ON stored.key = keyed.c_record_key
 AND (stored.date_expire IS NULL OR stored.date_expire > p_now);
END
$$
"""
DROP_CLAIM_COUNTED = (
    "DROP FUNCTION later_claim_counted(text, text[], bigint, integer, text, bigint)"
)


class Migration(migrations.Migration):
    dependencies = [("later_django", "0013_storage_unindexed_expiry")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="deliverymessage",
                    name="deliveries",
                    field=models.IntegerField(default=0, db_default=0),
                ),
            ],
            database_operations=[
                VendorSQL(
                    forwards={
                        "sqlite": [ADD_COLUMN],
                        "postgresql": [ADD_COLUMN, CREATE_CLAIM_COUNTED],
                    },
                    backwards={
                        "sqlite": [DROP_COLUMN],
                        "postgresql": [DROP_CLAIM_COUNTED, DROP_COLUMN],
                    },
                ),
            ],
        ),
    ]
