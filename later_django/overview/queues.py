"""The queues' figures: each queue's ready messages, the oldest one's age, its pause and
its running jobs.

Reads: the live workers, the depth counters, the paused keys of ``later_storage``
(one bounded key range) and one oldest-ready walk per queue holding ready messages;
none grows with the number of jobs."""

from __future__ import annotations

from collections import Counter

from later_django.core import clock
from later_django.engine.queue_pause import paused_queues
from later_django.overview.figures import QueueFigure
from later_django.overview.target import resolve_target
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import WorkerRow

#: A worker whose last heartbeat is older than this is not live (it beats every
#: third of its 30 s lease, so this is six missed beats).
LIVE_WORKER_MS = 60_000


def read_queues(
    using: str | None = None, namespace: str | None = None, *, now_ms: int | None = None
) -> tuple[list[QueueFigure], list[WorkerRow]]:
    """The queues of :func:`~later_django.overview.snapshot.read_overview`
    (``Overview.queues``) and the live workers they were counted from, without the
    rest of the overview: four small reads (the live workers, the depth counters, the
    paused keys and their values) and one oldest-ready walk per queue holding ready
    messages."""
    using, namespace = resolve_target(using, namespace)
    now = clock.now_ms() if now_ms is None else now_ms
    stores = stores_for(using)
    workers = stores.executions.workers_live(namespace, now - LIVE_WORKER_MS)
    return queue_figures(stores, namespace, now, workers), workers


def queue_figures(
    stores: Stores, namespace: str, now: int, workers: list[WorkerRow]
) -> list[QueueFigure]:
    """Every queue of ``namespace``, by name: its ready
    messages and, for those holding some, the oldest one's age; its pause; the jobs
    the live ``workers`` run from it. Paused queues that never held a message are
    listed with no messages."""
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
