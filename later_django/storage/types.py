"""Value types of the storage contract: operations, pages, index rows, metrics.

Times are integer epoch milliseconds (``*_ms``); see :mod:`later_django.core.clock`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

#: Metric buckets older than this many minutes are swept: one week, the longest range
#: of the dashboard's throughput chart (at most one row per stage and mode a minute).
METRIC_RETENTION_MINUTES = 7 * 24 * 60
#: Queue-length readings are kept one week.
QUEUE_SAMPLE_RETENTION_MINUTES = 7 * 24 * 60


# --- Key-value and range operations, applied atomically by ``Storage.apply`` ---


@dataclass(frozen=True)
class Set:
    """Sets ``key`` to ``value``; expires after ``ttl_seconds`` when given, else never.

    ``swept_with_job_index``: the expiry goes to ``date_expire_unindexed`` (a finished
    job's record, whose index row carries the same expiry; the job index's sweep
    deletes both), so the write changes no indexed column. Reads treat both expiries
    alike."""

    key: str
    value: bytes
    ttl_seconds: float | None = None
    swept_with_job_index: bool = False


@dataclass(frozen=True)
class Delete:
    """Deletes ``key``; deleting an absent key succeeds."""

    key: str


@dataclass(frozen=True)
class Expire:
    """Sets a time-to-live on an existing key; an absent key stays absent."""

    key: str
    ttl_seconds: float


@dataclass(frozen=True)
class Increment:
    """Adds ``by`` to the integer ``counter_value`` of ``key`` (created at 0, never expiring)."""

    key: str
    by: int = 1


@dataclass(frozen=True)
class RangeAdd:
    """Adds ``value`` to the ordered range ``key`` (a member already present keeps its cursor)."""

    key: str
    value: bytes
    ttl_seconds: float | None = None


@dataclass(frozen=True)
class RangeRemove:
    """Removes the member ``value`` from range ``key``; removing an absent member succeeds."""

    key: str
    value: bytes


@dataclass(frozen=True)
class RangeClear:
    """Removes every member of range ``key``."""

    key: str


@dataclass(frozen=True)
class RangeExpire:
    """Sets a time-to-live on every current member of range ``key``."""

    key: str
    ttl_seconds: float


StorageOperation = (
    Set | Delete | Expire | Increment | RangeAdd | RangeRemove | RangeClear | RangeExpire
)


class RangeOrder(enum.Enum):
    OLDEST_FIRST = "oldest_first"
    NEWEST_FIRST = "newest_first"


@dataclass(frozen=True)
class RangeItem:
    cursor: int
    value: bytes


@dataclass(frozen=True)
class RangePage:
    """A page of a range; ``next_cursor`` is ``None`` when the page came back short."""

    items: list[RangeItem]
    next_cursor: int | None


# --- The dashboard job index ---


@dataclass
class JobIndexRow:
    """One job's dashboard row (``later_jobs_index``)."""

    job_id: str
    payload_type: str
    stage: str
    stage_date_ms: int
    revision: int
    created_at_ms: int
    wait_ms: int | None = None
    wait_mode: str | None = None
    topic: str | None = None
    partition_id: int | None = None
    sequence: int | None = None
    parent_job_id: str | None = None
    date_expire_ms: int | None = None
    #: The record's queue, and its last error's class path (``None`` without errors):
    #: what the list filters match, from the filter indexes (migration 0018).
    queue_name: str | None = None
    error_class: str | None = None


@dataclass(frozen=True)
class IndexFilters:
    """The filters of a job list the filter indexes answer (migration 0018): each
    given one must match (the task exactly, the queue, the last error's class path)."""

    task_path: str | None = None
    queue_name: str | None = None
    error_class: str | None = None

    def columns(self) -> dict[str, str]:
        """The given filters as ``{index column: value}``."""
        given = {
            "payload_type": self.task_path,
            "queue_name": self.queue_name,
            "error_class": self.error_class,
        }
        return {column: value for column, value in given.items() if value is not None}


@dataclass(frozen=True)
class JobIndexUpsert:
    row: JobIndexRow


@dataclass(frozen=True)
class JobIndexRemove:
    job_id: str


JobIndexChange = JobIndexUpsert | JobIndexRemove


@dataclass(frozen=True)
class JobIndexPage:
    """A page of index rows; ``next_cursor`` is ``None`` when there is no further page."""

    items: list[JobIndexRow]
    next_cursor: str | None


@dataclass(frozen=True)
class JobIndexWaitStats:
    count: int
    avg_ms: int
    max_ms: int


@dataclass
class JobIndexMetricsBatch:
    """Pre-aggregated metric samples, written in one round trip per table.

    ``transitions``: ``(stage, at_ms, count)``; ``waits``: ``(mode, at_ms,
    count, sum_ms, max_ms)``. Samples of the same minute may repeat; they add up.
    """

    transitions: list[tuple[str, int, int]] = field(default_factory=list)
    waits: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    #: Attempts per task (``later_task_minute``).
    task_minutes: list[TaskMinuteSample] = field(default_factory=list)


class TaskMinuteSample(NamedTuple):
    """Attempts of one key of ``later_task_minute`` (the minute is ``at_ms``'s): samples of
    one key add up (``attempts``, ``sum_ms``), ``max_ms`` and ``sample_job_id`` (the highest
    job id, the newest ULID) are the largest. ``queue_name`` is last, with a default, so
    that samples built by position without one still make sense."""

    task_path: str
    outcome: str
    error_class: str
    at_ms: int
    duration_bucket: int
    attempts: int
    #: Milliseconds, rounded to whole ones when written.
    sum_ms: float
    max_ms: float
    sample_job_id: str
    #: The queue the job ran from.
    queue_name: str = ""


@dataclass(frozen=True)
class QueueAttempts:
    """Attempts of one queue that ended in a window: ``succeeded``, and ``failing``
    (retried, failed, timed out: :data:`~later_django.core.attempts.FAILING_OUTCOMES`);
    cancelled attempts are in neither."""

    queue_name: str
    succeeded: int
    failing: int

    @property
    def done(self) -> int:
        """Attempts that succeeded or failed."""
        return self.succeeded + self.failing


@dataclass(frozen=True)
class TaskOutcomeSums:
    """Attempts of a window summed per (task, outcome, duration bucket)."""

    task_path: str
    outcome: str
    duration_bucket: int
    count: int
    sum_ms: int
    max_ms: int


@dataclass(frozen=True)
class FailureGroup:
    """Failing attempts of a window for one (task, error class): how many, the first and
    last minute they were seen in (epoch ms of the minute's start), the newest job."""

    task_path: str
    error_class: str
    count: int
    first_minute_ms: int
    last_minute_ms: int
    sample_job_id: str


@dataclass(frozen=True)
class QueueSample:
    at_ms: int
    queued: int
    partitioned: int


class WalCheckpoint(enum.Enum):
    """What one WAL checkpoint attempt did."""

    NOT_APPLICABLE = "not_applicable"  # not SQLite, or not in WAL mode
    BELOW_THRESHOLD = "below_threshold"
    TRUNCATED = "truncated"
    GAVE_UP = "gave_up"
    SKIPPED = "skipped"  # checked too recently, or backing off after giving up


# --- Execution leases and worker heartbeats ---


@dataclass(frozen=True)
class ExecutionLease:
    """Who runs ``job_id`` and until when (``later_job_execution``)."""

    job_id: str
    owner: str
    lease_until_ms: int


@dataclass(frozen=True)
class WorkerRow:
    """One live worker process, as its heartbeat last wrote it (``later_worker``)."""

    worker_id: str
    host: str
    pid: int
    concurrency: int
    queues: list[str]
    busy: int
    started_at_ms: int
    heartbeat_at_ms: int
    #: The running jobs per queue (queues with none left out).
    busy_queues: dict[str, int] = field(default_factory=dict)


# --- The delivery queue ---


@dataclass(frozen=True)
class ClaimedMessage:
    """A message leased to one consumer until ``lease_until_ms``.

    ``record``: where the claim also read the job record the payload names
    (PostgreSQL, migration 0008), the key it looked up and its live value
    (``None``: absent); a hint the reader checks against the key it computes.
    ``deliveries`` above 1 on a job still ``enqueued``: an earlier claim's worker was
    lost before it wrote the job's start (decision 112)."""

    sequence: int
    queue_name: str
    payload: bytes
    priority: int
    available_at_ms: int
    lease_owner: str
    lease_until_ms: int
    #: Claims of the message not handed back, this one included (migration 0014).
    deliveries: int = 1
    record: tuple[str, bytes | None] | None = None
