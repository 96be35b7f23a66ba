"""The topic and partition tables: each topic's partition count (``later_topic``),
its partitions' sequences, rows, heads and fenced leases (``later_partition_*``).

The conventions every table follows are in :mod:`later_django.models`.
"""

from __future__ import annotations

from django.db import models

from later_django.models.base import NAME_LENGTH, LaterModel


class Topic(LaterModel):
    """A topic and its fixed partition count."""

    pk = models.CompositePrimaryKey("namespace", "topic")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partitions = models.IntegerField()
    created_at = models.BigIntegerField()

    class Meta(LaterModel.Meta):
        db_table = "later_topic"


class PartitionSequence(LaterModel):
    """The next job sequence of one partition."""

    pk = models.CompositePrimaryKey("namespace", "topic", "partition_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    next_sequence = models.BigIntegerField(default=0)

    class Meta(LaterModel.Meta):
        db_table = "later_partition_sequence"


class PartitionJob(LaterModel):
    """A job held in a partition at its sequence, with its earliest runnable time."""

    pk = models.CompositePrimaryKey("namespace", "topic", "partition_id", "sequence")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    sequence = models.BigIntegerField()
    job_id = models.CharField(max_length=NAME_LENGTH)
    earliest_run_at = models.BigIntegerField()

    class Meta(LaterModel.Meta):
        db_table = "later_partition_job"
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "job_id"], name="later_partition_job_job_uniq"
            )
        ]
        indexes = [
            models.Index(
                fields=["namespace", "topic", "partition_id", "sequence", "earliest_run_at"],
                name="later_partition_job_head_idx",
            )
        ]


class PartitionHead(LaterModel):
    """The current first job of each active partition (claims read only this).

    ``stage`` mirrors the head job's stage so a blocked head (delayed,
    requeued, waiting) is visible without reading the job record.
    """

    pk = models.CompositePrimaryKey("namespace", "topic", "partition_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    sequence = models.BigIntegerField()
    job_id = models.CharField(max_length=NAME_LENGTH)
    earliest_run_at = models.BigIntegerField()
    stage = models.CharField(max_length=20)

    class Meta(LaterModel.Meta):
        db_table = "later_partition_head"
        indexes = [
            models.Index(
                fields=["namespace", "earliest_run_at"], name="later_partition_head_due_idx"
            )
        ]


class PartitionLease(LaterModel):
    """Who owns a partition, until when, and the fencing epoch of that ownership."""

    pk = models.CompositePrimaryKey("namespace", "topic", "partition_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    owner = models.CharField(max_length=NAME_LENGTH, null=True)
    lease_until = models.BigIntegerField(default=0)
    epoch = models.BigIntegerField(default=0)

    class Meta(LaterModel.Meta):
        db_table = "later_partition_lease"
