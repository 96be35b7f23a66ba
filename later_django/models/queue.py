"""The delivery queue's tables: its messages (``later_delivery_queue``) and the
ready depth per queue its triggers keep (``later_queue_depth``).

The conventions every table follows are in :mod:`later_django.models`.
"""

from __future__ import annotations

from django.db import models

from later_django.models.base import NAME_LENGTH, LaterModel


class DeliveryMessage(LaterModel):
    """A message in the delivery queue (MessagePack command), leased while claimed."""

    sequence = models.BigAutoField(primary_key=True)
    namespace = models.CharField(max_length=NAME_LENGTH)
    queue_name = models.CharField(max_length=NAME_LENGTH)
    payload = models.BinaryField()
    priority = models.IntegerField(default=0)
    available_at = models.BigIntegerField()
    lease_owner = models.CharField(max_length=NAME_LENGTH, null=True)
    lease_until = models.BigIntegerField(null=True)
    #: Claims not handed back (migration 0014): more than one on a job still
    #: ``enqueued`` is an attempt lost before its start was written.
    deliveries = models.IntegerField(default=0, db_default=0)

    class Meta(LaterModel.Meta):
        db_table = "later_delivery_queue"


class QueueDepth(LaterModel):
    """Ready (unclaimed) messages per queue, kept exact by triggers on the queue."""

    pk = models.CompositePrimaryKey("namespace", "queue_name", "shard")
    namespace = models.CharField(max_length=NAME_LENGTH)
    queue_name = models.CharField(max_length=NAME_LENGTH)
    shard = models.SmallIntegerField(default=0, db_default=0)
    ready = models.BigIntegerField(default=0)

    class Meta(LaterModel.Meta):
        db_table = "later_queue_depth"
