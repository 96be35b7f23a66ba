"""``later_stage_counts`` counts every stage, the finished ones (``success``, ``failed``) too.

Migration 0002's triggers counted the live stages only, so the dashboard had to
count finished jobs from ``later_jobs_index`` (a capped ``COUNT(*)``). From here
on the same triggers count all seven stages: insert adds, a stage change moves
one from the old stage to the new (``running`` -> ``success``, ``failed`` ->
``enqueued``, ...), delete subtracts. The counters are built by 0002's builders
with a longer stage list, so both migrations share one trigger text.

A finished counter counts the index rows that *exist*: the unexpired ones plus
the expired ones the ``sweep`` maintenance pass has not deleted yet (it deletes
them in bounded batches every 10 s; each delete takes them off the counter).

* SQLite: the three ``later_stage_counts_on_*`` triggers are dropped and
  re-created (row triggers, shard 0).
* PostgreSQL: ``later_stage_counts_follow()`` is replaced (``CREATE OR REPLACE``);
  its statement-level triggers stay. A ``running`` -> ``success`` statement
  writes one more counter row in the same grouped upsert it already ran. The
  index is locked against writes (``SHARE ROW EXCLUSIVE``) until the migration
  commits, so no write falls between the backfill and the new function.

Then the finished rows already in the index are counted into shard 0
(``ON CONFLICT`` adds to a row that is already there). Reverse: 0002's triggers
(or function) come back and the finished counter rows are deleted.
"""

from importlib import import_module

from django.db import migrations

from tests.released_migrations._operations import VendorSQL

# 0002's trigger builders and stage list (a module name cannot be imported by ``from``).
_0002 = import_module("tests.released_migrations.0002_triggers_and_indexes")

LIVE_STAGES = _0002.LIVE_STAGES
FINISHED_STAGES = "('success', 'failed')"
#: Every stage; the counters follow these from this migration on.
COUNTED_STAGES = "('delayed', 'waiting', 'enqueued', 'running', 'requeued', 'success', 'failed')"

SQLITE_DROP_STAGE_TRIGGERS = [
    f"DROP TRIGGER IF EXISTS {name}" for name in _0002.SQLITE_STAGE_COUNT_TRIGGER_NAMES
]

BACKFILL_FINISHED = (
    "INSERT INTO later_stage_counts (namespace, stage, shard, count) "
    "SELECT namespace, stage, 0, COUNT(*) FROM later_jobs_index "
    "WHERE stage IN " + FINISHED_STAGES + " "
    "GROUP BY namespace, stage "
    "ON CONFLICT (namespace, stage, shard) "
    "DO UPDATE SET count = later_stage_counts.count + excluded.count"
)
REMOVE_FINISHED_COUNTERS = "DELETE FROM later_stage_counts WHERE stage IN " + FINISHED_STAGES

POSTGRES_LOCK_INDEX = "LOCK TABLE later_jobs_index IN SHARE ROW EXCLUSIVE MODE"


class Migration(migrations.Migration):
    dependencies = [("later_django", "0004_postgres_drop_storage_key_like_index")]

    operations = [
        VendorSQL(
            forwards={
                "sqlite": SQLITE_DROP_STAGE_TRIGGERS
                + _0002.sqlite_stage_count_triggers(COUNTED_STAGES)
                + [BACKFILL_FINISHED],
                "postgresql": [
                    POSTGRES_LOCK_INDEX,
                    _0002.postgres_stage_counts_function(
                        COUNTED_STAGES, create="CREATE OR REPLACE FUNCTION"
                    ),
                    BACKFILL_FINISHED,
                ],
            },
            backwards={
                "sqlite": SQLITE_DROP_STAGE_TRIGGERS
                + _0002.sqlite_stage_count_triggers(LIVE_STAGES)
                + [REMOVE_FINISHED_COUNTERS],
                "postgresql": [
                    POSTGRES_LOCK_INDEX,
                    _0002.postgres_stage_counts_function(
                        LIVE_STAGES, create="CREATE OR REPLACE FUNCTION"
                    ),
                    REMOVE_FINISHED_COUNTERS,
                ],
            },
        )
    ]
