"""The values of an overview: :class:`Overview` (one snapshot of a namespace) and its
figures, the stages in the dashboard's order, and ``later_status --json``'s shape.

Plain values, no reads: the reads that fill them are the sibling modules'
(:mod:`~later_django.overview.snapshot` composes them).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from later_django.core.stages import FINISHED_STAGES, LIVE_STAGES
from later_django.storage.types import JobIndexWaitStats, WorkerRow

#: Every stage, in the order the dashboard shows them.
STAGES: tuple[str, ...] = LIVE_STAGES + FINISHED_STAGES
#: Active partitions listed per topic (those with a head job or a lease owner).
PARTITIONS_SHOWN_PER_TOPIC = 64
WAIT_MODES: tuple[str, ...] = ("regular", "sequential")
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
    #: Workflows and batches by state (``engine.workflow_rest.count_by_state``).
    workflows: dict[str, int] = field(default_factory=dict)

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
            "workflows": dict(self.workflows),
            "consumer_lags": [asdict(lag) for lag in self.consumer_lags],
            "db_size_bytes": self.db_size_bytes,
        }

    def to_json_text(self) -> str:
        return json.dumps(self.as_json(), sort_keys=True)
