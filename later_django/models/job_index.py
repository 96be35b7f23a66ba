"""The dashboard's job index (``later_jobs_index``) and the striped counter of jobs
per stage its triggers keep (``later_stage_counts``).

The conventions every table follows are in :mod:`later_django.models`.
"""

from __future__ import annotations

from django.db import models

from later_django.models.base import KEY_LENGTH, NAME_LENGTH, LaterModel


class JobIndexEntry(LaterModel):
    """One row per job for the dashboard: its stage, when, and where it belongs.

    Queued jobs that are not on a partition have no row: the delivery queue
    answers for them. Upserts apply only when the incoming ``revision`` is at
    least the stored one.
    """

    pk = models.CompositePrimaryKey("namespace", "job_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    job_id = models.CharField(max_length=NAME_LENGTH)
    payload_type = models.CharField(max_length=KEY_LENGTH)
    stage = models.CharField(max_length=20)
    stage_date_ms = models.BigIntegerField()
    revision = models.BigIntegerField(default=0)
    created_at_ms = models.BigIntegerField()
    wait_ms = models.BigIntegerField(null=True)
    wait_mode = models.CharField(max_length=20, null=True)
    topic = models.CharField(max_length=NAME_LENGTH, null=True)
    partition_id = models.IntegerField(null=True)
    sequence = models.BigIntegerField(null=True)
    parent_job_id = models.CharField(max_length=NAME_LENGTH, null=True)
    date_expire = models.BigIntegerField(null=True)
    #: The record's queue and its last error's class path, for the list filters (0018).
    queue_name = models.CharField(max_length=NAME_LENGTH, null=True)
    error_class = models.TextField(null=True)

    class Meta(LaterModel.Meta):
        db_table = "later_jobs_index"
        verbose_name = "job"
        permissions = [("manage_jobs", "Can retry, delete and run jobs from the dashboard")]


class StageCount(LaterModel):
    """Jobs per stage, every stage (a striped counter, summed over ``shard`` on read)."""

    pk = models.CompositePrimaryKey("namespace", "stage", "shard")
    namespace = models.CharField(max_length=NAME_LENGTH)
    stage = models.CharField(max_length=20)
    shard = models.SmallIntegerField(default=0, db_default=0)
    count = models.BigIntegerField(default=0)

    class Meta(LaterModel.Meta):
        db_table = "later_stage_counts"
