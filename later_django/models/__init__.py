"""One model per ``later_*`` table, in one module per table family.

The models describe the schema (the hand-written migrations in
``later_django/migrations`` create exactly this) and serve the admin and other
cold paths through the ORM. Hot paths (enqueue, claim, finish, counters) run
named SQL from :mod:`later_django.storage.sql` on the same connection.

Conventions, as in Later's data model:

* every row carries a ``namespace``; processes sharing a database and a
  namespace share one pool of jobs, different namespaces never see each other;
* times in these tables are integer epoch **milliseconds** (``*_ms``,
  ``date_expire``, ``lease_until``, ``available_at`` ...), so comparisons and
  arithmetic in SQL are plain integer operations on both databases;
* ``date_expire`` makes a row invisible once it is in the past; the sweep
  deletes it later (a finished job's record uses ``date_expire_unindexed``
  instead, swept with its index row);
* triggers, partial and covering indexes are created by ``RunSQL`` per vendor
  (migrations ``0002``, ``0005``), not declared here.

Two counter tables carry a ``shard`` column the seed does not have:
``later_stage_counts`` and ``later_queue_depth``. On PostgreSQL their triggers
add to the row of shard ``pg_backend_pid() % 8``, so concurrent workers do not
queue on one hot row per stage; readers sum the shards (still O(1)). SQLite
has one writer at a time and always uses shard 0.

The models live in the modules of their table family (``kv``, ``queue``,
``execution``, ``partitions``, ``log``, ``job_index``, ``metrics``; ``base`` holds
``LaterModel`` and the column lengths) and are imported here: Django finds an app's
models in its ``models`` module, and ``later_django.models.X`` is their public path.
"""

from __future__ import annotations

from later_django.models.execution import JobExecution, Worker
from later_django.models.job_index import JobIndexEntry, StageCount
from later_django.models.kv import StorageRangeItem, StorageValue
from later_django.models.log import (
    LogConsumerLease,
    LogConsumerMember,
    LogConsumerOffset,
    LogPartition,
    LogRecord,
)
from later_django.models.metrics import (
    JobTransitionMetric,
    JobWaitMetric,
    QueueSample,
    TaskMinuteMetric,
)
from later_django.models.partitions import (
    PartitionHead,
    PartitionJob,
    PartitionLease,
    PartitionSequence,
    Topic,
)
from later_django.models.queue import DeliveryMessage, QueueDepth

__all__ = [
    "DeliveryMessage",
    "JobExecution",
    "JobIndexEntry",
    "JobTransitionMetric",
    "JobWaitMetric",
    "LogConsumerLease",
    "LogConsumerMember",
    "LogConsumerOffset",
    "LogPartition",
    "LogRecord",
    "PartitionHead",
    "PartitionJob",
    "PartitionLease",
    "PartitionSequence",
    "QueueDepth",
    "QueueSample",
    "StageCount",
    "StorageRangeItem",
    "StorageValue",
    "TaskMinuteMetric",
    "Topic",
    "Worker",
]
