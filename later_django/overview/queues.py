"""The one answer about which queues a namespace has, and each queue's figures.

A namespace's queues (:func:`queue_figures`) are the configured ones and every queue
its data shows, by name, idle ones included with zeroes:

* configured (:func:`configured_queues`): the ``QUEUES`` of every ``LaterBackend`` in
  ``TASKS`` (what the backend accepts and what ``later_worker`` claims by default)
  and the names of ``LATER["QUEUE_LIMITS"]``; they are the queues of
  ``LATER["NAMESPACE"]``, so another namespace read with these settings (the metrics
  view's ``NAMESPACES``, ``later_status --namespace``) lists only what its data shows;
* seen in the data: a depth counter (ready messages, or a queue that had some), a
  pause, or jobs running now in a live worker.

The admin's queues page, ``later_queue list``, ``later_status`` and the metrics view
all list this set. Reads: the live workers, the depth counters, the paused keys of
``later_storage`` (one bounded key range) and one oldest-ready walk per queue holding
ready messages; none grows with the number of jobs.
"""

from __future__ import annotations

from collections import Counter

from later_django.backend import LaterBackend
from later_django.compat.tasks import task_backends
from later_django.conf import later_settings
from later_django.core import clock
from later_django.engine.queue_pause import paused_queues
from later_django.overview.figures import QueueFigure
from later_django.overview.target import resolve_target
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import WorkerRow

#: A worker whose last heartbeat is older than this is not live (it beats every
#: third of its 30 s lease, so this is six missed beats).
LIVE_WORKER_MS = 60_000


def configured_queues() -> set[str]:
    """The queues named by a ``LaterBackend``'s ``QUEUES`` in ``TASKS`` and by
    ``LATER["QUEUE_LIMITS"]`` (``QUEUES: []`` names none: any queue is allowed)."""
    names = set(later_settings().queue_limits)
    for backend in task_backends.all():
        if isinstance(backend, LaterBackend):
            names |= set(backend.queues)
    return names


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
    """Every queue of ``namespace`` (the module's one answer), by name: its ready
    messages and, for those holding some, the oldest one's age; its pause; the jobs
    the live ``workers`` run from it. Configured queues and paused ones that never
    held a message are listed with no messages."""
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
    listed = {figure.queue_name for figure in figures}
    figures += [QueueFigure(name, 0, None) for name in _configured_in(namespace) - listed]
    return sorted(figures, key=lambda figure: figure.queue_name)


def _configured_in(namespace: str) -> set[str]:
    """The configured queues when ``namespace`` is ``LATER["NAMESPACE"]``, else none."""
    return configured_queues() if namespace == later_settings().namespace else set()
