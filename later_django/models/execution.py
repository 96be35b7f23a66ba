"""The execution tables: the lease of each running job (``later_job_execution``)
and each worker process's heartbeat row (``later_worker``).

The conventions every table follows are in :mod:`later_django.models`.
"""

from __future__ import annotations

from django.db import models

from later_django.models.base import NAME_LENGTH, LaterModel


class JobExecution(LaterModel):
    """The lease under which one worker executes one (non-partitioned) job."""

    pk = models.CompositePrimaryKey("namespace", "job_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    job_id = models.CharField(max_length=NAME_LENGTH)
    owner = models.CharField(max_length=NAME_LENGTH)
    lease_until = models.BigIntegerField()
    attempt = models.IntegerField(default=1)
    started_at = models.BigIntegerField()

    class Meta(LaterModel.Meta):
        db_table = "later_job_execution"
        indexes = [models.Index(fields=["lease_until"], name="later_job_execution_lease_idx")]


class Worker(LaterModel):
    """A worker process's heartbeat; the live set feeds partition assignment."""

    pk = models.CompositePrimaryKey("namespace", "worker_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    worker_id = models.CharField(max_length=NAME_LENGTH)
    host = models.CharField(max_length=NAME_LENGTH)
    pid = models.IntegerField()
    concurrency = models.IntegerField()
    queues = models.TextField(default="[]")
    busy = models.IntegerField(default=0)
    #: The running jobs per queue, a JSON object (``{"emails": 3}``).
    busy_queues = models.TextField(default="{}", db_default="{}")
    started_at = models.BigIntegerField()
    heartbeat_at = models.BigIntegerField()

    class Meta(LaterModel.Meta):
        db_table = "later_worker"
        # No index on heartbeat_at (migration 0015): a few rows per namespace, found
        # through the primary key's namespace, and each heartbeat stays a HOT update.
