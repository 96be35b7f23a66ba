"""``later_storage.date_expire_unindexed``: the expiry of a finished job's record,
held by no index, so finishing a job updates its record as a HOT update.

Before, the finish wrote the record's expiry into ``date_expire``, which the sweep's
partial index ``later_storage_expire_idx`` holds: on PostgreSQL an update that changes
an indexed column (predicate columns included) cannot be HOT, so every finished job
left a dead record version and an index entry for VACUUM. The job's index row already
carries the same expiry in ``later_jobs_index.date_expire`` (indexed there, and that
row is rewritten at finish anyway); the sweep now deletes the record together with
that row. ``bench/bloat.py --quick`` (5,000 jobs; dead tuples per job that only VACUUM
reclaims, job path): 4.49 -> 3.55 enqueued in batches of 500 at once, 4.31 -> 3.17 at
200 jobs/s; ``later_storage`` alone 1.47 -> 0.54 and 1.31 -> 0.17.

Every read of ``later_storage`` treats a row as absent once either expiry has passed,
so a finished job still disappears at the end of its retention. Rows written before
this migration keep their ``date_expire`` and are swept as before. Additive: a
nullable column (no rewrite on either vendor). Reverse: the expiries move back into
``date_expire`` (one ``UPDATE``), then the column is dropped.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("later_django", "0012_task_minute")]

    operations = [
        migrations.AddField(
            model_name="storagevalue",
            name="date_expire_unindexed",
            field=models.BigIntegerField(null=True),
        ),
        migrations.RunSQL(
            migrations.RunSQL.noop,
            reverse_sql=(
                "UPDATE later_storage SET date_expire = date_expire_unindexed "
                "WHERE date_expire_unindexed IS NOT NULL"
            ),
        ),
    ]
