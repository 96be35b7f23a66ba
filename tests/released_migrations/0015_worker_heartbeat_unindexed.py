"""``later_worker`` without ``later_worker_heartbeat_idx``.

Every heartbeat (a third of the lease, per worker process) updates its row's
``heartbeat_at``; with that column indexed, PostgreSQL cannot make the update HOT,
so each beat left a dead row version and index entry for VACUUM: 0.001 - 0.002 dead
tuples per job at 200 jobs/s (``bench/bloat.py --quick --quick-rate 200``), written
by time, not by jobs. The table holds a few rows per namespace; the live-worker list
and the purge of dead rows find them through the primary key's leading
``namespace`` and filter the heartbeat on the rows. Reverse: the index again.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("later_django", "0014_delivery_count")]

    operations = [
        migrations.RemoveIndex(model_name="worker", name="later_worker_heartbeat_idx"),
    ]
