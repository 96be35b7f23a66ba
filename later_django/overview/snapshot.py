"""One snapshot of a namespace: :func:`read_overview`, the figures of the dashboard and
of ``later_status``, read once and shared by both.

:func:`read_overview` takes one snapshot of a namespace: jobs per stage,
throughput and queue-wait statistics of the last minute, ready messages and
the oldest ready message's age per queue, live workers, topic partitions,
recurring jobs, workflows by state and the database size. Every read is O(1) or bounded by a small
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
* the queues are :mod:`~later_django.overview.queues`'s one answer: the configured
  ones (idle ones with zeroes) and those the data shows;
* paused queues are one bounded key range of ``later_storage``;
* running jobs per queue are the live workers' ``busy_queues`` (their rows, as
  the heartbeat last wrote them), consumer-group lag the retained logs' end
  offsets less the groups' committed ones (two small tables).

Every read is a store's (:class:`~later_django.storage.dashboard.DashboardReads`
and the index, execution and upkeep stores of :func:`~later_django.storage.stores.stores_for`);
this module composes the figures.
"""

from __future__ import annotations

from later_django.core import clock
from later_django.engine import workflow_rest
from later_django.engine.recurring import list_recurring
from later_django.overview.figures import (
    STAGES,
    WAIT_MODES,
    Overview,
    RecurringFigure,
    StageFigure,
)
from later_django.overview.queues import LIVE_WORKER_MS, queue_figures
from later_django.overview.target import resolve_target
from later_django.overview.topics import read_consumer_lags, read_topics
from later_django.storage.ports.dashboard import DashboardPort
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexWaitStats

#: The throughput window: the current and the previous minute bucket.
THROUGHPUT_WINDOW_MINUTES = 2


def read_overview(
    using: str | None = None, namespace: str | None = None, *, now_ms: int | None = None
) -> Overview:
    """A snapshot of ``namespace`` on ``using`` (defaults from ``LATER``), in a bounded
    number of small reads (about a dozen statements, whatever the number of jobs)."""
    using, namespace = resolve_target(using, namespace)
    now = clock.now_ms() if now_ms is None else now_ms
    stores = stores_for(using)
    workers = stores.executions.workers_live(namespace, now - LIVE_WORKER_MS)
    queues = queue_figures(stores, namespace, now, workers)
    transitions, waits = _read_recent(stores.dashboard, namespace, now)
    return Overview(
        namespace=namespace,
        using=using,
        now_ms=now,
        stages=read_stages(stores.dashboard, namespace, sum(queue.ready for queue in queues)),
        transitions=transitions,
        waits=waits,
        queues=queues,
        workers=workers,
        topics=read_topics(stores.dashboard, namespace, now),
        recurring=read_recurring(using, namespace),
        db_size_bytes=stores.upkeep.total_db_size_bytes(),
        consumer_lags=read_consumer_lags(stores.dashboard, namespace),
        workflows=workflow_rest.count_by_state(stores.kv, namespace),
    )


def read_stages(reads: DashboardPort, namespace: str, ready: int) -> list[StageFigure]:
    """Every stage's count, in the dashboard's order; ``ready`` is the namespace's ready
    messages (the queues' depth counters summed)."""
    counts = dict.fromkeys(STAGES, 0)
    for stage, total in reads.stage_totals(namespace).items():
        if stage in counts:
            counts[stage] += max(total, 0)
    # Queued jobs not on a partition have no index row: the job queues' depth counts them.
    counts["enqueued"] += ready
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
