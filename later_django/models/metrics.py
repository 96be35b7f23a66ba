"""The metric tables: minute buckets of stage transitions and queue waits, each
task's attempts per minute (``later_task_minute``), and the queue-length history
(``later_queue_samples``).

The conventions every table follows are in :mod:`later_django.models`.
"""

from __future__ import annotations

from django.db import models

from later_django.models.base import KEY_LENGTH, NAME_LENGTH, LaterModel


class JobTransitionMetric(LaterModel):
    """Transitions into a stage per minute bucket (throughput panel)."""

    pk = models.CompositePrimaryKey("namespace", "stage", "minute_bucket")
    namespace = models.CharField(max_length=NAME_LENGTH)
    stage = models.CharField(max_length=20)
    minute_bucket = models.BigIntegerField()
    count = models.BigIntegerField(default=0)

    class Meta(LaterModel.Meta):
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

    class Meta(LaterModel.Meta):
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

    class Meta(LaterModel.Meta):
        db_table = "later_task_minute"


class QueueSample(LaterModel):
    """Queue length once a minute (queued and partitioned), kept one week."""

    pk = models.CompositePrimaryKey("namespace", "minute_bucket")
    namespace = models.CharField(max_length=NAME_LENGTH)
    minute_bucket = models.BigIntegerField()
    queued = models.BigIntegerField(default=0)
    partitioned = models.BigIntegerField(default=0)

    class Meta(LaterModel.Meta):
        db_table = "later_queue_samples"
