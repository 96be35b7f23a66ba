"""``later_worker.busy_queues``: each worker's running jobs per queue.

The heartbeat writes it with ``busy`` (every third of the lease), so the metrics
view reports running jobs per queue from the live workers' rows, a table as small
as the fleet, and never from the delivery queue or the job index. A row written
before this migration reads as ``{}`` (the column's database default) until its
next beat.
"""

from django.db import migrations, models

from later_django.migration_operations import ReleasedMigration


class Migration(ReleasedMigration):
    dependencies = [("later_django", "0010_count_every_stage")]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="busy_queues",
            field=models.TextField(default="{}", db_default="{}"),
        ),
    ]
