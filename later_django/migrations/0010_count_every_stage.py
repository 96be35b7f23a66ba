"""``later_stage_counts`` counts every stage a ``later_jobs_index`` row holds.

Until here the counter triggers counted the seven stages listed in migration
0005 (``WHERE stage IN (...)``), so a new stage needed a new trigger text.
``cancelled`` (the eighth) is the first: from here the triggers count whatever
stage a row holds, with no list, and a stage added later needs no migration.
Every row of the index holds a stage of :mod:`later_django.core.stages`, so
nothing else is counted. No row is ``cancelled`` yet: there is nothing to
backfill.

* SQLite: the three ``later_stage_counts_on_*`` row triggers are re-created.
* PostgreSQL: ``later_stage_counts_follow()`` is replaced (``CREATE OR REPLACE``,
  migration 0009's text less the filter); its statement triggers stay.

Reverse: 0009's function and 0005's SQLite triggers come back, and the
``cancelled`` counter rows are deleted (the jobs stay; their stage is unknown to
that code).
"""

from importlib import import_module

from django.db import migrations

from later_django.migration_operations import VendorSQL

_0002 = import_module("later_django.migrations.0002_triggers_and_indexes")
_0005 = import_module("later_django.migrations.0005_count_finished_stages")
_0009 = import_module("later_django.migrations.0009_postgres_counters_without_joins")

_SQLITE_UPSERT = (
    "INSERT INTO later_stage_counts (namespace, stage, shard, count) "
    "SELECT {row}.namespace, {row}.stage, 0, {delta} WHERE true "
    "ON CONFLICT (namespace, stage, shard) DO UPDATE SET count = count + excluded.count;"
)

SQLITE_STAGE_COUNT_TRIGGERS = [
    "CREATE TRIGGER later_stage_counts_on_insert AFTER INSERT ON later_jobs_index BEGIN "
    + _SQLITE_UPSERT.format(row="NEW", delta="1")
    + " END",
    "CREATE TRIGGER later_stage_counts_on_move AFTER UPDATE OF stage ON later_jobs_index "
    "WHEN OLD.stage IS NOT NEW.stage BEGIN "
    + _SQLITE_UPSERT.format(row="OLD", delta="-1")
    + " "
    + _SQLITE_UPSERT.format(row="NEW", delta="1")
    + " END",
    "CREATE TRIGGER later_stage_counts_on_delete AFTER DELETE ON later_jobs_index BEGIN "
    + _SQLITE_UPSERT.format(row="OLD", delta="-1")
    + " END",
]

STAGE_COUNTS_FOLLOW = """
CREATE OR REPLACE FUNCTION later_stage_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    shard_id smallint := (pg_backend_pid() % 8)::smallint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO later_stage_counts (namespace, stage, shard, count)
        SELECT namespace, stage, shard_id, COUNT(*) FROM new_rows
        GROUP BY namespace, stage ORDER BY namespace, stage
        ON CONFLICT (namespace, stage, shard)
        DO UPDATE SET count = later_stage_counts.count + EXCLUDED.count;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO later_stage_counts (namespace, stage, shard, count)
        SELECT namespace, stage, shard_id, -COUNT(*) FROM old_rows
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
        GROUP BY namespace, stage HAVING SUM(delta) <> 0 ORDER BY namespace, stage
        ON CONFLICT (namespace, stage, shard)
        DO UPDATE SET count = later_stage_counts.count + EXCLUDED.count;
    END IF;
    RETURN NULL;
END;
$$
"""

REMOVE_CANCELLED_COUNTERS = "DELETE FROM later_stage_counts WHERE stage = 'cancelled'"


class Migration(migrations.Migration):
    dependencies = [("later_django", "0009_postgres_counters_without_joins")]

    operations = [
        VendorSQL(
            forwards={
                "sqlite": _0005.SQLITE_DROP_STAGE_TRIGGERS + SQLITE_STAGE_COUNT_TRIGGERS,
                "postgresql": [STAGE_COUNTS_FOLLOW],
            },
            backwards={
                "sqlite": _0005.SQLITE_DROP_STAGE_TRIGGERS
                + _0002.sqlite_stage_count_triggers(_0005.COUNTED_STAGES)
                + [REMOVE_CANCELLED_COUNTERS],
                "postgresql": [_0009.STAGE_COUNTS_FOLLOW, REMOVE_CANCELLED_COUNTERS],
            },
        )
    ]
