"""Every Prometheus metric later_django exports: name, type, labels, meaning.

Two sources export them: the metrics view (:mod:`later_django.metrics`, figures
read from the counters of each namespace) and a worker's ``--metrics-port``
(what that process, or a supervisor's children, did). The names follow
Prometheus' conventions: base units (seconds, bytes), ``_total`` on counters
(the name here is the family's, without it), labels bounded by configuration
(namespace, stage, queue, task, topic, group, partition), never a job id or an
argument. The Grafana dashboard and docs/observability.md use only these names;
tests hold all three to this list.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The buckets of the duration and wait histograms, in seconds (5 ms to 30 min).
DURATION_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
)  # fmt: skip


@dataclass(frozen=True)
class MetricName:
    """One exported family. ``kind`` is Prometheus' type (``counter`` names get
    ``_total`` on their sample, histograms ``_bucket``/``_sum``/``_count``)."""

    name: str
    kind: str
    labels: tuple[str, ...]
    help: str

    @property
    def samples(self) -> tuple[str, ...]:
        """The sample names a scrape shows for this family."""
        if self.kind == "counter":
            return (f"{self.name}_total",)
        if self.kind == "histogram":
            return tuple(f"{self.name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
        return (self.name,)


#: What the metrics view exports, per namespace (from the counters; no job is scanned).
VIEW_METRICS: tuple[MetricName, ...] = (
    MetricName(
        "later_jobs_in_stage",
        "gauge",
        ("namespace", "stage"),
        "Jobs in each stage (finished stages: those not purged yet).",
    ),
    MetricName(
        "later_queue_ready_jobs",
        "gauge",
        ("namespace", "queue"),
        "Ready messages waiting in each queue.",
    ),
    MetricName(
        "later_queue_running_jobs",
        "gauge",
        ("namespace", "queue"),
        "Jobs of each queue running now, from the live workers' last heartbeats.",
    ),
    MetricName(
        "later_queue_oldest_ready_age_seconds",
        "gauge",
        ("namespace", "queue"),
        "How long the oldest ready message of each queue has waited (0: none ready).",
    ),
    MetricName(
        "later_queue_paused",
        "gauge",
        ("namespace", "queue"),
        "1 while the queue is paused, else 0.",
    ),
    MetricName(
        "later_topic_backlog_jobs",
        "gauge",
        ("namespace", "topic"),
        "Jobs waiting on the topic's partitions, from each head to the newest.",
    ),
    MetricName(
        "later_topic_blocked_heads",
        "gauge",
        ("namespace", "topic"),
        "Partitions whose head waits (delayed, retrying, waiting for a parent).",
    ),
    MetricName(
        "later_workflows",
        "gauge",
        ("namespace", "state"),
        "Workflows and batches by state (running until the workflows pass has seen "
        "every job finished; then failed, cancelled or succeeded until forgotten).",
    ),
    MetricName(
        "later_workers_live",
        "gauge",
        ("namespace",),
        "Worker processes whose heartbeat is at most 60 s old.",
    ),
    MetricName(
        "later_workers_threads",
        "gauge",
        ("namespace",),
        "Job threads of the live workers (their concurrency, summed).",
    ),
    MetricName(
        "later_workers_busy_threads",
        "gauge",
        ("namespace",),
        "Job threads of the live workers running a job, at their last heartbeat.",
    ),
    MetricName(
        "later_consumer_group_lag_records",
        "gauge",
        ("namespace", "group", "topic", "partition"),
        "Records of a retained log's partition that the consumer group has not committed.",
    ),
    MetricName(
        "later_recurring_overdue",
        "gauge",
        ("namespace",),
        "Recurring jobs whose next run is more than 60 s past.",
    ),
    MetricName(
        "later_database_size_bytes",
        "gauge",
        ("database",),
        "Size of the database (None where the vendor cannot tell).",
    ),
)

#: What a worker's ``--metrics-port`` exports (summed over a supervisor's children).
WORKER_METRICS: tuple[MetricName, ...] = (
    MetricName(
        "later_jobs",
        "counter",
        ("task", "queue", "outcome"),
        "Attempts that ended, by outcome: success, failed, retried, cancelled, timed_out.",
    ),
    MetricName(
        "later_job_duration_seconds",
        "histogram",
        ("task", "queue"),
        "How long each attempt ran, from its start to the task's return.",
    ),
    MetricName(
        "later_job_wait_seconds",
        "histogram",
        ("queue",),
        "How long each attempt waited, from ready to its start: a retried job counts once "
        "per attempt (its retry is ready when due).",
    ),
    MetricName(
        "later_claimed_jobs",
        "counter",
        ("queue",),
        "Attempts this worker claimed and started (queue messages and partition heads): "
        "a retried job counts once per attempt.",
    ),
    MetricName(
        "later_lease_losses",
        "counter",
        ("lease",),
        "Leases lost while held (delivery, partition, queue_slot): the work may run elsewhere.",
    ),
    MetricName(
        "later_database_errors",
        "counter",
        (),
        "Database errors the worker backed off from and retried.",
    ),
    MetricName(
        "later_lock_conflicts",
        "counter",
        ("kind",),
        "Worker turns that lost a lock conflict with another transaction (kind: deadlock, "
        "lock_wait) and ran again at once: rare on PostgreSQL, a measure of contention "
        "on MySQL/MariaDB.",
    ),
    MetricName(
        "later_worker_busy_threads",
        "gauge",
        (),
        "Job threads running a job now.",
    ),
    MetricName(
        "later_worker_threads",
        "gauge",
        (),
        "Job threads (the worker's concurrency).",
    ),
)


def every_sample_name() -> frozenset[str]:
    """Every sample name either source can show."""
    return frozenset(
        sample for metric in (*VIEW_METRICS, *WORKER_METRICS) for sample in metric.samples
    )
