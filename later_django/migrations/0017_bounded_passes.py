"""``later_jobs_index_queued_idx``: the index rows of queued jobs not on a partition.

Queued jobs off partitions have no index row (the queue answers for them); rows of
that kind are leftovers of earlier versions, which the ``purge`` pass deletes. It
found them through ``later_jobs_index_stage_idx`` (``namespace, stage = 'enqueued'``)
and the row's ``topic``: every queued partitioned job read at every run (issue 32).
This partial index holds the leftovers alone, so the purge reads what it deletes;
no write of the job path makes a row it holds (one predicate evaluated per index
row written, on columns already indexed, so no update loses HOT). Reverse: dropped.

Renumbered and re-chained at merge (0016, a claim index, is written meanwhile).
"""

from later_django.migration_operations import ReleasedMigration, VendorSQL

CREATE = (
    "CREATE INDEX later_jobs_index_queued_idx ON later_jobs_index (namespace, job_id) "
    "WHERE stage = 'enqueued' AND topic IS NULL"
)
DROP = "DROP INDEX IF EXISTS later_jobs_index_queued_idx"


class Migration(ReleasedMigration):
    dependencies = [("later_django", "0016_claim_by_queue")]

    operations = [
        VendorSQL(
            forwards={"sqlite": [CREATE], "postgresql": [CREATE]},
            backwards={"sqlite": [DROP], "postgresql": [DROP]},
        ),
    ]
