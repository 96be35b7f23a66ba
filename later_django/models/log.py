"""The retained-log tables: partitions' next offsets, records, and the consumer
groups' offsets, members and fenced leases (``later_log_*``).

The conventions every table follows are in :mod:`later_django.models`.
"""

from __future__ import annotations

from django.db import models

from later_django.models.base import NAME_LENGTH, LaterModel


class LogPartition(LaterModel):
    """The next offset of one retained-log partition (independent of job sequences)."""

    pk = models.CompositePrimaryKey("namespace", "topic", "partition_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    next_offset = models.BigIntegerField(default=0)

    class Meta(LaterModel.Meta):
        db_table = "later_log_partition"


class LogRecord(LaterModel):
    """An immutable retained-log record. ``record_offset`` avoids SQL's OFFSET keyword."""

    pk = models.CompositePrimaryKey("namespace", "topic", "partition_id", "record_offset")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    record_offset = models.BigIntegerField()
    record_key = models.BinaryField(null=True)
    payload = models.BinaryField()
    appended_at = models.BigIntegerField()

    class Meta(LaterModel.Meta):
        db_table = "later_log_record"


class LogConsumerOffset(LaterModel):
    """A consumer group's next offset in one partition."""

    pk = models.CompositePrimaryKey("namespace", "group_name", "topic", "partition_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    group_name = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    next_offset = models.BigIntegerField(default=0)
    updated_at = models.BigIntegerField()

    class Meta(LaterModel.Meta):
        db_table = "later_log_consumer_offset"


class LogConsumerMember(LaterModel):
    """A live member of a consumer group (heartbeat)."""

    pk = models.CompositePrimaryKey("namespace", "group_name", "topic", "member_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    group_name = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    member_id = models.CharField(max_length=NAME_LENGTH)
    joined_at = models.BigIntegerField()
    heartbeat_at = models.BigIntegerField()

    class Meta(LaterModel.Meta):
        db_table = "later_log_consumer_member"


class LogConsumerLease(LaterModel):
    """A fenced claim of one partition by one member of a consumer group."""

    pk = models.CompositePrimaryKey("namespace", "group_name", "topic", "partition_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    group_name = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    owner = models.CharField(max_length=NAME_LENGTH, null=True)
    lease_until = models.BigIntegerField(default=0)
    epoch = models.BigIntegerField(default=0)

    class Meta(LaterModel.Meta):
        db_table = "later_log_consumer_lease"
