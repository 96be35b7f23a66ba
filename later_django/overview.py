"""The figures of the dashboard and of ``later_status``, read once and shared by both.

:func:`read_overview` takes one snapshot of a namespace: jobs per stage,
throughput and queue-wait statistics of the last minute, ready messages and
the oldest ready message's age per queue, live workers, topic partitions,
recurring jobs and the database size. Every read is O(1) or bounded by a small
table (counters, metric buckets, workers, partitions); none counts or scans
``later_jobs_index`` or ``later_delivery_queue``:

* every stage comes from the trigger-kept counters (``later_stage_counts``,
  shards summed; ``enqueued`` adds ``later_queue_depth``), live stages as
  :meth:`Storage.job_index_stage_counts` reads them;
* finished stages (``success``, ``failed``) count the index rows that exist:
  the unexpired ones plus expired ones the ``sweep`` pass (every 10 s, in
  bounded batches) has not deleted yet. The job lists leave expired rows out at
  once, so for up to a sweep interval, longer behind a large backlog of expired
  rows, a finished count can be above what its list shows;
* the oldest ready message of a queue is the first ready one in queue order
  (a walk of the primary key that stops at the first match), asked only for
  queues whose counter says they hold ready messages;
* paused queues are one bounded key range of ``later_storage``;
* running jobs per queue are the live workers' ``busy_queues`` (their rows, as
  the heartbeat last wrote them), consumer-group lag the retained logs' end
  offsets less the groups' committed ones (two small tables).

Every read is a store's (:class:`~later_django.storage.dashboard.DashboardReads`
and the index, execution and upkeep stores of :func:`~later_django.storage.stores.stores_for`);
this module composes the figures.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from later_django.conf import later_settings
from later_django.core import clock
from later_django.core.keys import RESERVED_PREFIX
from later_django.core.stages import FINISHED_STAGES, LIVE_STAGES
from later_django.engine.queue_pause import paused_queues
from later_django.engine.recurring import list_recurring
from later_django.storage.dashboard import (
    PartitionHeadRow,
    PartitionKey,
    PartitionLeaseRow,
)
from later_django.storage.ports.dashboard import DashboardPort
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import JobIndexWaitStats, QueueSample, WorkerRow

#: Every stage, in the order the dashboard shows them.
STAGES: tuple[str, ...] = LIVE_STAGES + FINISHED_STAGES
#: A worker whose last heartbeat is older than this is not live (it beats every
#: third of its 30 s lease, so this is six missed beats).
LIVE_WORKER_MS = 60_000
#: The throughput window: the current and the previous minute bucket.
THROUGHPUT_WINDOW_MINUTES = 2
#: Queue-length history ranges of the chart, in minutes.
HISTORY_RANGES: dict[str, int] = {"hour": 60, "day": 24 * 60, "week": 7 * 24 * 60}
#: The stages the throughput chart draws: moves into them are jobs finishing.
THROUGHPUT_CHART_STAGES: tuple[str, ...] = ("success", "failed")
#: Active partitions listed per topic (those with a head job or a lease owner).
PARTITIONS_SHOWN_PER_TOPIC = 64
WAIT_MODES: tuple[str, ...] = ("regular", "sequential")

#: Rows read from each partition table at most (bounds the overview on huge topics).
_PARTITION_ROWS_READ = 5_000
#: Head stages that block the rows behind them.
BLOCKING_HEAD_STAGES = frozenset({"delayed", "requeued", "waiting"})


@dataclass(frozen=True)
class StageFigure:
    """Jobs in one stage (finished stages: index rows not swept yet, see the module)."""

    stage: str
    count: int

    @property
    def live(self) -> bool:
        return self.stage in LIVE_STAGES


@dataclass(frozen=True)
class QueueFigure:
    """One queue: ready messages (counter), the age of its oldest ready message,
    since when and by whom it is paused (``None``: not paused), and its running jobs."""

    queue_name: str
    ready: int
    oldest_ready_age_ms: int | None
    paused_at_ms: int | None = None
    paused_by: str | None = None
    #: Jobs running now, as the live workers' last heartbeats report them (at most
    #: a third of the lease old).
    running: int = 0


@dataclass(frozen=True)
class PartitionFigure:
    """One partition of a topic: its head job, backlog and lease."""

    partition_id: int
    head_job_id: str | None
    head_stage: str | None
    head_sequence: int | None
    #: Jobs from the head to the newest (``next_sequence - head sequence``).
    backlog: int
    lease_owner: str | None
    lease_until_ms: int | None
    epoch: int | None
    lease_live: bool

    @property
    def blocked(self) -> bool:
        """The head waits (delayed, retrying or waiting for a parent), so the rows behind do."""
        return self.head_stage in BLOCKING_HEAD_STAGES


@dataclass(frozen=True)
class TopicFigure:
    topic: str
    partitions: int
    shown: list[PartitionFigure]
    #: Partitions not listed (idle ones beyond :data:`PARTITIONS_SHOWN_PER_TOPIC`).
    not_shown: int
    #: Over every active partition read (shown or not): jobs from the heads to the
    #: newest, and heads that block the rows behind them.
    backlog: int = 0
    blocked_heads: int = 0


@dataclass(frozen=True)
class ConsumerLag:
    """How far one consumer group is behind on one partition of a retained log."""

    group: str
    topic: str
    partition_id: int
    #: Records appended that the group has not committed (end offset - its offset).
    lag: int


@dataclass(frozen=True)
class RecurringFigure:
    recurring_id: str
    cron: str
    task_path: str
    timezone: str | None
    sequential: bool
    next_run_ms: int | None
    last_run_ms: int | None


@dataclass
class Overview:
    """One snapshot of a namespace; see the module docstring for what each part costs."""

    namespace: str
    using: str
    now_ms: int
    stages: list[StageFigure]
    transitions: dict[str, int]
    waits: dict[str, JobIndexWaitStats]
    queues: list[QueueFigure]
    workers: list[WorkerRow]
    topics: list[TopicFigure]
    recurring: list[RecurringFigure]
    db_size_bytes: int | None
    problems: list[str] = field(default_factory=list)
    consumer_lags: list[ConsumerLag] = field(default_factory=list)

    def count(self, stage: str) -> int:
        for figure in self.stages:
            if figure.stage == stage:
                return figure.count
        raise KeyError(f"no stage {stage!r}; stages are {list(STAGES)}")

    @property
    def queued(self) -> int:
        """Ready messages in the namespace's queues."""
        return sum(queue.ready for queue in self.queues)

    @property
    def oldest_ready_age_ms(self) -> int | None:
        """The oldest ready message's age over the queues that are not paused (a paused
        queue's jobs wait on purpose, so they do not fail ``later_status --check``)."""
        ages = [
            q.oldest_ready_age_ms
            for q in self.queues
            if q.oldest_ready_age_ms is not None and q.paused_at_ms is None
        ]
        return max(ages) if ages else None

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the shape of ``later_status --json``)."""
        return {
            "namespace": self.namespace,
            "database": self.using,
            "now_ms": self.now_ms,
            "stages": {figure.stage: {"count": figure.count} for figure in self.stages},
            "throughput_last_minute": dict(self.transitions),
            "waits": {mode: asdict(stats) for mode, stats in self.waits.items()},
            "queues": [asdict(queue) for queue in self.queues],
            "oldest_ready_age_ms": self.oldest_ready_age_ms,
            "workers": [asdict(worker) for worker in self.workers],
            "topics": [
                {
                    "topic": topic.topic,
                    "partitions": topic.partitions,
                    "not_shown": topic.not_shown,
                    "backlog": topic.backlog,
                    "blocked_heads": topic.blocked_heads,
                    "shown": [
                        {**asdict(partition), "blocked": partition.blocked}
                        for partition in topic.shown
                    ],
                }
                for topic in self.topics
            ],
            "recurring": [asdict(item) for item in self.recurring],
            "consumer_lags": [asdict(lag) for lag in self.consumer_lags],
            "db_size_bytes": self.db_size_bytes,
        }

    def to_json_text(self) -> str:
        return json.dumps(self.as_json(), sort_keys=True)


def resolve_target(using: str | None, namespace: str | None) -> tuple[str, str]:
    """``(alias, namespace)``: the given ones, else ``LATER["DATABASE"]``/``["NAMESPACE"]``."""
    settings = later_settings()
    return using or settings.database, namespace or settings.namespace


def read_overview(
    using: str | None = None, namespace: str | None = None, *, now_ms: int | None = None
) -> Overview:
    """A snapshot of ``namespace`` on ``using`` (defaults from ``LATER``), in a bounded
    number of small reads (about a dozen statements, whatever the number of jobs)."""
    using, namespace = resolve_target(using, namespace)
    now = clock.now_ms() if now_ms is None else now_ms
    stores = stores_for(using)
    workers = stores.executions.workers_live(namespace, now - LIVE_WORKER_MS)
    queues = _read_queues(stores, namespace, now, workers)
    transitions, waits = _read_recent(stores.dashboard, namespace, now)
    return Overview(
        namespace=namespace,
        using=using,
        now_ms=now,
        stages=_read_stages(stores.dashboard, namespace, queues),
        transitions=transitions,
        waits=waits,
        queues=queues,
        workers=workers,
        topics=_read_topics(stores.dashboard, namespace, now),
        recurring=read_recurring(using, namespace),
        db_size_bytes=stores.upkeep.total_db_size_bytes(),
        consumer_lags=_read_consumer_lags(stores.dashboard, namespace),
    )


def read_queues(
    using: str | None = None, namespace: str | None = None, *, now_ms: int | None = None
) -> tuple[list[QueueFigure], list[WorkerRow]]:
    """The queues of :func:`read_overview` (``Overview.queues``) and the live workers
    they were counted from, without the rest of the overview: four small reads (the
    live workers, the depth counters, the paused keys and their values) and one
    oldest-ready walk per queue holding ready messages."""
    using, namespace = resolve_target(using, namespace)
    now = clock.now_ms() if now_ms is None else now_ms
    stores = stores_for(using)
    workers = stores.executions.workers_live(namespace, now - LIVE_WORKER_MS)
    return _read_queues(stores, namespace, now, workers), workers


def _read_queues(
    stores: Stores, namespace: str, now: int, workers: list[WorkerRow]
) -> list[QueueFigure]:
    """Every queue's ready messages and, for those holding some, the oldest one's age;
    paused queues too (those never used are listed with no messages), by name; each
    with the jobs the live ``workers`` run from it."""
    reads = stores.dashboard
    paused = {queue.name: queue for queue in paused_queues(stores, namespace)}
    running: Counter[str] = Counter()
    for worker in workers:
        running.update(worker.busy_queues)
    figures = []
    for queue_name, ready in reads.queue_depths(namespace):
        ready = max(ready, 0)
        oldest = None
        if ready > 0:
            available_at = reads.oldest_ready_at_ms(namespace, queue_name, now)
            oldest = None if available_at is None else max(now - available_at, 0)
        pause = paused.pop(queue_name, None)
        figures.append(
            QueueFigure(
                queue_name,
                ready,
                oldest,
                None if pause is None else pause.paused_at_ms,
                None if pause is None else pause.by,
                running.pop(queue_name, 0),
            )
        )
    figures += [
        QueueFigure(q.name, 0, None, q.paused_at_ms, q.by, running.pop(q.name, 0))
        for q in paused.values()
    ]
    figures += [QueueFigure(name, 0, None, running=busy) for name, busy in running.items()]
    return sorted(figures, key=lambda figure: figure.queue_name)


def _read_stages(
    reads: DashboardPort, namespace: str, job_queues: list[QueueFigure]
) -> list[StageFigure]:
    """Every stage's count; ``job_queues`` are the namespace's queues."""
    counts = dict.fromkeys(STAGES, 0)
    for stage, total in reads.stage_totals(namespace).items():
        if stage in counts:
            counts[stage] += max(total, 0)
    # Queued jobs not on a partition have no index row: the job queues' depth counts them.
    counts["enqueued"] += sum(queue.ready for queue in job_queues)
    return [StageFigure(stage, counts[stage]) for stage in STAGES]


def _read_recent(
    reads: DashboardPort, namespace: str, now: int
) -> tuple[dict[str, int], dict[str, JobIndexWaitStats]]:
    """Transitions per stage and waits per mode over the throughput window."""
    last = clock.minute_bucket(now)
    first = last - THROUGHPUT_WINDOW_MINUTES + 1
    transitions = dict.fromkeys(STAGES, 0)
    transitions.update(reads.transitions_between(namespace, first, last))
    waits = {mode: JobIndexWaitStats(0, 0, 0) for mode in WAIT_MODES}
    waits.update(reads.waits_between(namespace, first, last))
    return transitions, waits


def _read_topics(reads: DashboardPort, namespace: str, now: int) -> list[TopicFigure]:
    """Each topic with its active partitions (a head or an owner), at most
    :data:`PARTITIONS_SHOWN_PER_TOPIC` shown; later_django's own idle topics left out."""
    topics = reads.topics(namespace)
    if not topics:
        return []
    heads = reads.partition_heads(namespace, _PARTITION_ROWS_READ)
    leases = reads.partition_leases(namespace, _PARTITION_ROWS_READ)
    sequences = reads.partition_next_sequences(namespace, _PARTITION_ROWS_READ)
    figures = []
    for topic, partitions in topics:
        # Active: a head (jobs waiting) or an owner (held now, or until its lease lapsed).
        active = sorted(
            {p for (t, p) in heads if t == topic}
            | {p for (t, p), lease in leases.items() if t == topic and lease.owner is not None}
        )
        if not active and topic.startswith(RESERVED_PREFIX):
            continue  # later_django's own topics are shown only while in use
        every = [
            _partition_figure(
                (topic, partition_id),
                heads.get((topic, partition_id)),
                leases.get((topic, partition_id)),
                sequences.get((topic, partition_id)),
                now,
            )
            for partition_id in active
        ]
        shown = every[:PARTITIONS_SHOWN_PER_TOPIC]
        figures.append(
            TopicFigure(
                topic=topic,
                partitions=partitions,
                shown=shown,
                not_shown=max(len(active) - len(shown), 0),
                backlog=sum(partition.backlog for partition in every),
                blocked_heads=sum(partition.blocked for partition in every),
            )
        )
    return figures


def _read_consumer_lags(reads: DashboardPort, namespace: str) -> list[ConsumerLag]:
    """Every consumer group's lag on every partition it has an offset on."""
    ends = reads.log_partition_ends(namespace, _PARTITION_ROWS_READ)
    offsets = reads.consumer_offsets(namespace, _PARTITION_ROWS_READ)
    return [
        ConsumerLag(group, topic, partition, max(ends.get((topic, partition), 0) - offset, 0))
        for (group, topic, partition), offset in offsets.items()
    ]


def _partition_figure(
    key: PartitionKey,
    head: PartitionHeadRow | None,
    lease: PartitionLeaseRow | None,
    next_sequence: int | None,
    now: int,
) -> PartitionFigure:
    """One partition's figure: the backlog runs from the head to the newest job."""
    head_sequence = None if head is None else head.sequence
    backlog = 0
    if head_sequence is not None and next_sequence is not None:
        backlog = max(next_sequence - head_sequence, 1)
    elif head_sequence is not None:
        backlog = 1
    return PartitionFigure(
        partition_id=key[1],
        head_job_id=None if head is None else head.job_id,
        head_stage=None if head is None else head.stage,
        head_sequence=head_sequence,
        backlog=backlog,
        lease_owner=None if lease is None else lease.owner,
        lease_until_ms=None if lease is None else lease.lease_until_ms,
        epoch=None if lease is None else lease.epoch,
        lease_live=lease is not None and lease.owner is not None and lease.lease_until_ms > now,
    )


def read_recurring(using: str, namespace: str) -> list[RecurringFigure]:
    """The recurring definitions (``later_django.engine.recurring.list_recurring``)."""
    return [
        RecurringFigure(
            recurring_id=item.id,
            cron=item.cron,
            task_path=item.task_path,
            timezone=item.timezone,
            sequential=item.sequential,
            next_run_ms=item.next_run_ms,
            last_run_ms=item.last_run_ms,
        )
        for item in list_recurring(stores=stores_for(using), namespace=namespace)
    ]


def read_queue_history(
    range_name: str,
    using: str | None = None,
    namespace: str | None = None,
    *,
    now_ms: int | None = None,
) -> list[QueueSample]:
    """The queue-length readings of the last ``range_name`` (``hour``/``day``/``week``),
    oldest first; ``ValueError`` for another range."""
    if range_name not in HISTORY_RANGES:
        raise ValueError(f"unknown history range {range_name!r}; use one of {list(HISTORY_RANGES)}")
    using, namespace = resolve_target(using, namespace)
    now = clock.now_ms() if now_ms is None else now_ms
    since = now - HISTORY_RANGES[range_name] * clock.MINUTE_MS
    return stores_for(using).metrics.queue_samples_since(namespace, since)


def read_throughput(
    first_bucket: int,
    last_bucket: int,
    slot_minutes: int,
    using: str | None = None,
    namespace: str | None = None,
    *,
    stages: tuple[str, ...] = THROUGHPUT_CHART_STAGES,
) -> dict[str, list[tuple[int, int, int]]]:
    """Per stage, the moves into it in the minute buckets ``first_bucket..last_bucket``
    folded into slots of ``slot_minutes``: ``(slot, moves, busiest minute's moves)`` per
    slot with moves (``later_job_transition_metrics``, one bounded read per stage)."""
    using, namespace = resolve_target(using, namespace)
    reads = stores_for(using).dashboard
    return {
        stage: reads.transitions_per_slot(namespace, stage, first_bucket, last_bucket, slot_minutes)
        for stage in stages
    }
