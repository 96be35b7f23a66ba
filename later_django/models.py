"""One model per ``later_*`` table.

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
"""

from __future__ import annotations

from django.db import models, router

NAME_LENGTH = 200
KEY_LENGTH = 500


class LaterManager(models.Manager):
    """The manager of every later_* model: the ORM for cold paths.

    ``write_alias()`` is the database the router picks for this model's writes
    (``db_manager("alias")`` picks another); ``storage.stores.stores_for`` of it
    is the storage there. Hot paths run the storage drivers' named SQL.
    """

    def write_alias(self) -> str:
        return self._db or router.db_for_write(self.model)


class LaterModel(models.Model):
    """Base of every later_* model (only adds the manager)."""

    objects = LaterManager()

    class Meta:
        abstract = True


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

    class Meta:
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

    class Meta:
        db_table = "later_storage_range"
        constraints = [
            models.UniqueConstraint(
                fields=["range_key", "value"], name="later_storage_range_member_uniq"
            )
        ]
        indexes = [
            models.Index(fields=["range_key", "sequence"], name="later_storage_range_key_idx")
        ]


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

    class Meta:
        db_table = "later_delivery_queue"


class QueueDepth(LaterModel):
    """Ready (unclaimed) messages per queue, kept exact by triggers on the queue."""

    pk = models.CompositePrimaryKey("namespace", "queue_name", "shard")
    namespace = models.CharField(max_length=NAME_LENGTH)
    queue_name = models.CharField(max_length=NAME_LENGTH)
    shard = models.SmallIntegerField(default=0, db_default=0)
    ready = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_queue_depth"


class JobExecution(LaterModel):
    """The lease under which one worker executes one (non-partitioned) job."""

    pk = models.CompositePrimaryKey("namespace", "job_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    job_id = models.CharField(max_length=NAME_LENGTH)
    owner = models.CharField(max_length=NAME_LENGTH)
    lease_until = models.BigIntegerField()
    attempt = models.IntegerField(default=1)
    started_at = models.BigIntegerField()

    class Meta:
        db_table = "later_job_execution"
        indexes = [models.Index(fields=["lease_until"], name="later_job_execution_lease_idx")]


class Topic(LaterModel):
    """A topic and its fixed partition count."""

    pk = models.CompositePrimaryKey("namespace", "topic")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partitions = models.IntegerField()
    created_at = models.BigIntegerField()

    class Meta:
        db_table = "later_topic"


class PartitionSequence(LaterModel):
    """The next job sequence of one partition."""

    pk = models.CompositePrimaryKey("namespace", "topic", "partition_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    next_sequence = models.BigIntegerField(default=0)

    class Meta:
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

    class Meta:
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

    class Meta:
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

    class Meta:
        db_table = "later_partition_lease"


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

    class Meta:
        db_table = "later_worker"
        # No index on heartbeat_at (migration 0015): a few rows per namespace, found
        # through the primary key's namespace, and each heartbeat stays a HOT update.


class LogPartition(LaterModel):
    """The next offset of one retained-log partition (independent of job sequences)."""

    pk = models.CompositePrimaryKey("namespace", "topic", "partition_id")
    namespace = models.CharField(max_length=NAME_LENGTH)
    topic = models.CharField(max_length=NAME_LENGTH)
    partition_id = models.IntegerField()
    next_offset = models.BigIntegerField(default=0)

    class Meta:
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

    class Meta:
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

    class Meta:
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

    class Meta:
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

    class Meta:
        db_table = "later_log_consumer_lease"


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

    class Meta:
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

    class Meta:
        db_table = "later_stage_counts"


class JobTransitionMetric(LaterModel):
    """Transitions into a stage per minute bucket (throughput panel)."""

    pk = models.CompositePrimaryKey("namespace", "stage", "minute_bucket")
    namespace = models.CharField(max_length=NAME_LENGTH)
    stage = models.CharField(max_length=20)
    minute_bucket = models.BigIntegerField()
    count = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_job_transition_metrics"


class JobWaitMetric(LaterModel):
    """Queue-wait count, sum and max per mode ("regular"/"sequential") per minute."""

    pk = models.CompositePrimaryKey("namespace", "mode", "minute_bucket")
    namespace = models.CharField(max_length=NAME_LENGTH)
    mode = models.CharField(max_length=20)
    minute_bucket = models.BigIntegerField()
    count = models.BigIntegerField(default=0)
    sum_ms = models.BigIntegerField(default=0)
    max_ms = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_job_wait_metrics"


class TaskMinuteMetric(LaterModel):
    """Attempts of one task per queue, minute, outcome, error class and duration bucket.

    ``error_class`` is the error's class path for the failing outcomes
    (:data:`~later_django.core.attempts.FAILING_OUTCOMES`), else ``''``;
    ``duration_bucket`` is a bucket of :mod:`later_django.core.duration_histogram`
    (-1: duration unknown); ``sample_job_id`` the newest job (highest ULID) of a failing
    row, else ``''``. The key leads with the minute, so a window's rows are one range of
    the primary key; kept as long as the transition metrics (decision 100).
    """

    pk = models.CompositePrimaryKey(
        "namespace",
        "minute_bucket",
        "task_path",
        "queue_name",
        "outcome",
        "error_class",
        "duration_bucket",
    )
    namespace = models.CharField(max_length=NAME_LENGTH)
    minute_bucket = models.BigIntegerField()
    task_path = models.CharField(max_length=KEY_LENGTH)
    #: The queue the job ran from (the record's ``queue_name``).
    queue_name = models.CharField(max_length=NAME_LENGTH)
    outcome = models.CharField(max_length=20)
    error_class = models.CharField(max_length=KEY_LENGTH)
    duration_bucket = models.SmallIntegerField()
    count = models.BigIntegerField(default=0)
    sum_ms = models.BigIntegerField(default=0)
    max_ms = models.BigIntegerField(default=0)
    sample_job_id = models.CharField(max_length=NAME_LENGTH, default="")

    class Meta:
        db_table = "later_task_minute"


class QueueSample(LaterModel):
    """Queue length once a minute (queued and partitioned), kept one week."""

    pk = models.CompositePrimaryKey("namespace", "minute_bucket")
    namespace = models.CharField(max_length=NAME_LENGTH)
    minute_bucket = models.BigIntegerField()
    queued = models.BigIntegerField(default=0)
    partitioned = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_queue_samples"
