"""PostgreSQL: ``later_claim_batch`` claims from every queue when ``p_queue_names`` is NULL.

A worker started for ``QUEUES: []`` (any queue name is valid) takes every queue
of its namespace, also queues first used after it started. The claim then
carries no queue condition at all: ``p_queue_names IS NULL`` is true for every
row, so nothing is looked up, and no list of names is discovered or kept. The
function keeps its signature, its one statement and its pinned plan (the
ordered walk of ``later_delivery_queue_claim_idx``, whose included
``queue_name`` column was only ever a filter); with a list of names it claims
exactly as before. SQLite has no function: its claim statement carries the
same condition (``storage/sqlite/queries/queue.py``).

Reverse: migration 0003's function body comes back.
"""

from importlib import import_module

from django.db import migrations

from tests.released_migrations._operations import VendorSQL

# 0003's function text (a module name cannot be imported by ``from``): the reverse.
_0003 = import_module("tests.released_migrations.0003_postgres_claim_function")

CLAIM_FROM_EVERY_QUEUE = """
CREATE OR REPLACE FUNCTION later_claim_batch(
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
)
UPDATE later_delivery_queue AS q SET lease_owner = p_owner, lease_until = p_lease_until
FROM chosen WHERE q.sequence = chosen.sequence
RETURNING q.sequence, q.queue_name, q.payload, q.priority, q.available_at,
          q.lease_owner, q.lease_until
$$
"""
CLAIM_FROM_LISTED_QUEUES = _0003.CREATE_CLAIM_FUNCTION.replace(
    "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1
)


class Migration(migrations.Migration):
    dependencies = [("later_django", "0005_count_finished_stages")]

    operations = [
        VendorSQL(
            forwards={"sqlite": [], "postgresql": [CLAIM_FROM_EVERY_QUEUE]},
            backwards={"sqlite": [], "postgresql": [CLAIM_FROM_LISTED_QUEUES]},
        )
    ]
