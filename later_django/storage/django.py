"""``DjangoStorage``: the storage contract on a Django database connection.

It is composed of four parts, each in its own module with its own named SQL:

* :class:`~later_django.storage.kv.KeyValueStore` - values, ranges, ``apply``;
* :class:`~later_django.storage.upkeep.UpkeepStore` - size, sweep, WAL, vacuum;
* :class:`~later_django.storage.job_index.JobIndexStore` - the dashboard index,
  its counters, metrics and queue samples;
* :class:`~later_django.storage.execution.ExecutionStore` - execution leases of
  running jobs and worker heartbeats.

The delivery queue is a separate object,
:class:`~later_django.storage.queue.SqlDeliveryQueue`, on the same alias.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from later_django.storage.contract import Storage
from later_django.storage.db import AliasBound
from later_django.storage.execution import ExecutionStore
from later_django.storage.job_index import JobIndexStore
from later_django.storage.kv import KeyValueStore
from later_django.storage.stores import driver_for
from later_django.storage.types import JobIndexChange, StorageOperation
from later_django.storage.upkeep import UpkeepStore


class DjangoStorage(KeyValueStore, UpkeepStore, JobIndexStore, ExecutionStore, Storage):
    """The :class:`Storage` contract for SQLite and PostgreSQL on the alias ``using``."""

    def __init__(self, using: str = "default") -> None:
        AliasBound.__init__(self, using)
        KeyValueStore.__init__(self, driver_for(using))
        JobIndexStore.__init__(self, driver_for(using))
        UpkeepStore.__init__(self, driver_for(using))
        ExecutionStore.__init__(self, driver_for(using))

    def apply_with_job_index(
        self,
        operations: Sequence[StorageOperation],
        namespace: str,
        changes: Sequence[JobIndexChange],
        *,
        savepoint: bool = True,
    ) -> None:
        """Applies ``operations`` and the index ``changes`` in one transaction (inside
        the caller's: one savepoint, or none with ``savepoint=False``): a job's
        record and its dashboard row commit together."""
        with transaction.atomic(using=self.using, savepoint=savepoint):
            self.apply(operations, savepoint=False)
            self.apply_index_changes(namespace, changes)
