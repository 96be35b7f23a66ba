"""PostgreSQL: the counter triggers of an ``UPDATE`` sum both transition tables, no join.

``later_stage_counts_follow()`` (migrations 0002, 0005) and
``later_queue_depth_follow()`` (0002) found the rows an ``UPDATE`` moved by
joining ``old_rows`` to ``new_rows`` on the key. A transition table has no
index, and PL/pgSQL keeps the plan it made at the session's first call, when a
statement had changed a few rows: a nested loop. At 10,000 rows in one
statement (a parent failing, and its 10,000 continuations with it) that join
made the finishing transaction take about 40 s instead of under a second.

No join is needed: the count of a stage moves by (new rows in it) minus (old
rows in it), and a row that stayed in its stage adds one and takes one away. So
each function now sums ``+1`` per new row and ``-1`` per old row, grouped, and
writes only the groups whose sum is not zero: the same counters, in time linear
in the rows. (A queue row that changed queue now moves between the two queues'
depths; the join counted it under the new queue only. No code changes a
row's queue.)

Nothing is recounted: the counters mean what they meant, so the functions are
replaced in place (``CREATE OR REPLACE``) and their triggers stay. SQLite's
row triggers join nothing. Reverse: the functions of 0005 and 0002 come back.
"""

from importlib import import_module

from django.db import migrations

from tests.released_migrations._operations import VendorSQL

# Earlier migrations' builders and stage lists (a module name cannot be imported by ``from``).
_0002 = import_module("tests.released_migrations.0002_triggers_and_indexes")
_0005 = import_module("tests.released_migrations.0005_count_finished_stages")

STAGE_COUNTS_FOLLOW = (
    """
CREATE OR REPLACE FUNCTION later_stage_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    shard_id smallint := (pg_backend_pid() % 8)::smallint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO later_stage_counts (namespace, stage, shard, count)
        SELECT namespace, stage, shard_id, COUNT(*) FROM new_rows
        WHERE stage IN """
    + _0005.COUNTED_STAGES
    + """
        GROUP BY namespace, stage ORDER BY namespace, stage
        ON CONFLICT (namespace, stage, shard)
        DO UPDATE SET count = later_stage_counts.count + EXCLUDED.count;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO later_stage_counts (namespace, stage, shard, count)
        SELECT namespace, stage, shard_id, -COUNT(*) FROM old_rows
        WHERE stage IN """
    + _0005.COUNTED_STAGES
    + """
        GROUP BY namespace, stage ORDER BY namespace, stage
        ON CONFLICT (namespace, stage, shard)
        DO UPDATE SET count = later_stage_counts.count + EXCLUDED.count;
    ELSE
        INSERT INTO later_stage_counts (namespace, stage, shard, count)
        SELECT namespace, stage, shard_id, SUM(delta) FROM (
            SELECT namespace, stage, 1 AS delta FROM new_rows
            UNION ALL
            SELECT namespace, stage, -1 AS delta FROM old_rows
        ) AS moves
        WHERE stage IN """
    + _0005.COUNTED_STAGES
    + """
        GROUP BY namespace, stage HAVING SUM(delta) <> 0 ORDER BY namespace, stage
        ON CONFLICT (namespace, stage, shard)
        DO UPDATE SET count = later_stage_counts.count + EXCLUDED.count;
    END IF;
    RETURN NULL;
END;
$$
"""
)

QUEUE_DEPTH_FOLLOW = """
CREATE OR REPLACE FUNCTION later_queue_depth_follow() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    shard_id smallint := (pg_backend_pid() % 8)::smallint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO later_queue_depth (namespace, queue_name, shard, ready)
        SELECT namespace, queue_name, shard_id, COUNT(*) FROM new_rows
        WHERE lease_until IS NULL
        GROUP BY namespace, queue_name ORDER BY namespace, queue_name
        ON CONFLICT (namespace, queue_name, shard)
        DO UPDATE SET ready = later_queue_depth.ready + EXCLUDED.ready;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO later_queue_depth (namespace, queue_name, shard, ready)
        SELECT namespace, queue_name, shard_id, -COUNT(*) FROM old_rows
        WHERE lease_until IS NULL
        GROUP BY namespace, queue_name ORDER BY namespace, queue_name
        ON CONFLICT (namespace, queue_name, shard)
        DO UPDATE SET ready = later_queue_depth.ready + EXCLUDED.ready;
    ELSE
        INSERT INTO later_queue_depth (namespace, queue_name, shard, ready)
        SELECT namespace, queue_name, shard_id, SUM(delta) FROM (
            SELECT namespace, queue_name, 1 AS delta FROM new_rows WHERE lease_until IS NULL
            UNION ALL
            SELECT namespace, queue_name, -1 AS delta FROM old_rows WHERE lease_until IS NULL
        ) AS moves
        GROUP BY namespace, queue_name HAVING SUM(delta) <> 0
        ORDER BY namespace, queue_name
        ON CONFLICT (namespace, queue_name, shard)
        DO UPDATE SET ready = later_queue_depth.ready + EXCLUDED.ready;
    END IF;
    RETURN NULL;
END;
$$
"""

#: 0002's queue-depth function, as ``CREATE OR REPLACE`` (the reverse).
_QUEUE_DEPTH_0002 = _0002.POSTGRES_FUNCTIONS[0].replace(
    "CREATE FUNCTION later_queue_depth_follow()",
    "CREATE OR REPLACE FUNCTION later_queue_depth_follow()",
)


class Migration(migrations.Migration):
    dependencies = [("later_django", "0008_claim_with_records")]

    operations = [
        VendorSQL(
            forwards={"sqlite": [], "postgresql": [STAGE_COUNTS_FOLLOW, QUEUE_DEPTH_FOLLOW]},
            backwards={
                "sqlite": [],
                "postgresql": [
                    _0002.postgres_stage_counts_function(
                        _0005.COUNTED_STAGES, create="CREATE OR REPLACE FUNCTION"
                    ),
                    _QUEUE_DEPTH_0002,
                ],
            },
        )
    ]
