"""The key-value tables: values with expiry (``later_storage``) and ordered ranges
(``later_storage_range``), the tables of :mod:`later_django.storage.kv`.

The conventions every table follows are in :mod:`later_django.models`.
"""

from __future__ import annotations

from django.db import models

from later_django.models.base import KEY_LENGTH, LaterModel


class StorageValue(LaterModel):
    """A key-value entry: MessagePack job records and internal state."""

    key = models.CharField(max_length=KEY_LENGTH, primary_key=True)
    value = models.BinaryField(null=True)
    counter_value = models.BigIntegerField(null=True)
    date_created = models.BigIntegerField()
    date_updated = models.BigIntegerField(null=True)
    date_expire = models.BigIntegerField(null=True)
    #: The expiry of a finished job's record. No index holds it, so the record's
    #: finishing update stays HOT on PostgreSQL; the job's index row carries the same
    #: expiry, and the sweep deletes the record with that row (migration 0013).
    date_expire_unindexed = models.BigIntegerField(null=True)

    class Meta(LaterModel.Meta):
        db_table = "later_storage"
        verbose_name = "storage value"


class StorageRangeItem(LaterModel):
    """A member of an ordered range (a secondary index such as a parent's children).

    ``sequence`` is the stable cursor: it only ever grows (SQLite
    ``AUTOINCREMENT``, PostgreSQL identity), so pages never shift.
    """

    sequence = models.BigAutoField(primary_key=True)
    range_key = models.CharField(max_length=KEY_LENGTH)
    value = models.BinaryField()
    date_expire = models.BigIntegerField(null=True)

    class Meta(LaterModel.Meta):
        db_table = "later_storage_range"
        constraints = [
            models.UniqueConstraint(
                fields=["range_key", "value"], name="later_storage_range_member_uniq"
            )
        ]
        indexes = [
            models.Index(fields=["range_key", "sequence"], name="later_storage_range_key_idx")
        ]
