"""``later_task_minute``: attempts per task, queue, minute, outcome, error class and
duration bucket, the source of the per-task, failure and queue throughput figures
(issue 16, decisions 100 and 101).

Additive: one new table, nothing else changes, and nothing is backfilled (the pages
show attempts from the first flush after this migration on). The primary key leads
with ``(namespace, minute_bucket)``, so a window's rows, the upsert of a flush and the
retention's delete are each one range of it; no second index. The same text serves
both vendors (no trigger, no vendor setting).

Reverse: the table is dropped with its figures (the jobs are untouched).
"""

from django.db import migrations, models

from later_django.migration_operations import ReleasedMigration


class Migration(ReleasedMigration):
    dependencies = [("later_django", "0011_worker_busy_queues")]

    operations = [
        migrations.CreateModel(
            name="TaskMinuteMetric",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "namespace",
                        "minute_bucket",
                        "task_path",
                        "queue_name",
                        "outcome",
                        "error_class",
                        "duration_bucket",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("namespace", models.CharField(max_length=200)),
                ("minute_bucket", models.BigIntegerField()),
                ("task_path", models.CharField(max_length=500)),
                ("queue_name", models.CharField(max_length=200)),
                ("outcome", models.CharField(max_length=20)),
                ("error_class", models.CharField(max_length=500)),
                ("duration_bucket", models.SmallIntegerField()),
                ("count", models.BigIntegerField(default=0)),
                ("sum_ms", models.BigIntegerField(default=0)),
                ("max_ms", models.BigIntegerField(default=0)),
                ("sample_job_id", models.CharField(default="", max_length=200)),
            ],
            options={"db_table": "later_task_minute"},
        ),
    ]
