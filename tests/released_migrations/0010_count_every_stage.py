"""``later_stage_counts`` counts every stage a ``later_jobs_index`` row holds.

Until here the counter triggers counted the seven stages listed in migration
0005 (``WHERE stage IN (...)``), so a new stage needed a new trigger text.
``cancelled`` (the eighth) is the first: from here the triggers count whatever
stage a row holds, with no list, and a stage added later needs no migration.
Every row of the index holds a stage of :mod:`later_django.core.stages`, so
nothing else is counted. No row is ``cancelled`` yet: there is nothing to
backfill.

* SQLite: the three ``later_stage_counts_on_*`` row triggers are re-created (0005's
  text less the filter).
* PostgreSQL: ``later_stage_counts_follow()`` is replaced (``CREATE OR REPLACE``,
  migration 0009's text less the filter); its statement triggers stay.

Both texts are the earlier migrations' own, with the filter taken out, so the one
difference is the one this migration makes.

Reverse: 0009's function and 0005's SQLite triggers come back, and the
``cancelled`` counter rows are deleted (the jobs stay; their stage is unknown to
that code).
"""

from importlib import import_module

from django.db import migrations

from tests.released_migrations._operations import VendorSQL

_0002 = import_module("tests.released_migrations.0002_triggers_and_indexes")
_0005 = import_module("tests.released_migrations.0005_count_finished_stages")
_0009 = import_module("tests.released_migrations.0009_postgres_counters_without_joins")

#: The stage filter of the earlier texts, as it reads in them.
_POSTGRES_FILTER = "        WHERE stage IN " + _0005.COUNTED_STAGES + "\n"
_SQLITE_FILTERS = [f"WHERE {row}.stage IN {_0005.COUNTED_STAGES}" for row in ("NEW", "OLD")]


def _sqlite_unfiltered(trigger: str) -> str:
    for stage_filter in _SQLITE_FILTERS:
        trigger = trigger.replace(stage_filter, "WHERE true")
    return trigger


#: 0005's three SQLite triggers, with no stage filter.
SQLITE_STAGE_COUNT_TRIGGERS = [
    _sqlite_unfiltered(trigger)
    for trigger in _0002.sqlite_stage_count_triggers(_0005.COUNTED_STAGES)
]
#: 0009's function, with no stage filter (it had one in each of its three branches).
STAGE_COUNTS_FOLLOW = _0009.STAGE_COUNTS_FOLLOW.replace(_POSTGRES_FILTER, "")
assert _0009.STAGE_COUNTS_FOLLOW.count(_POSTGRES_FILTER) == 3
assert not any(f in t for f in _SQLITE_FILTERS for t in SQLITE_STAGE_COUNT_TRIGGERS)

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
