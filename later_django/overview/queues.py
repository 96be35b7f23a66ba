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

from later_django import inputs
from later_django.backend import LaterBackend
from later_django.compat.tasks import task_backends
from later_django.conf import later_settings
from later_django.core import clock
from later_django.core.keys import is_reserved
from later_django.engine.queue_pause import paused_queues
from later_django.overview.figures import QueueFigure
from later_django.overview.target import resolve_target
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import WorkerRow

#: A worker whose last heartbeat is older than this is not live (it beats every
#: third of its 30 s lease, so this is six missed beats).
LIVE_WORKER_MS = 60_000
#: Known queues a refusal lists, at most.
KNOWN_LISTED = 20


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


def known_queue_names(using: str | None = None, namespace: str | None = None) -> set[str]:
    """The names of the queues :func:`queue_figures` lists (configured, or seen in the
    data: a depth counter, a pause or jobs running now), without their figures: three
    small reads (the depth counters, the paused keys, the live workers)."""
    using, namespace = resolve_target(using, namespace)
    stores = stores_for(using)
    names = {queue_name for queue_name, _ in stores.dashboard.queue_depths(namespace)}
    names |= {queue.name for queue in paused_queues(stores, namespace)}
    live_since = clock.now_ms() - LIVE_WORKER_MS
    for worker in stores.executions.workers_live(namespace, live_since):
        names.update(worker.busy_queues)
    return names | _configured_in(namespace)


def known_queue(field: str, name: str) -> str:
    """``name`` when it is a queue the pause and resume of the dashboard and of
    ``later_queue`` may act on: a name (:func:`later_django.inputs.name`: no NUL, at
    most 200 characters, no surrounding blanks) of a configured queue or one seen in
    the data (:func:`known_queue_names`). ``InputError`` otherwise, listing the known
    ones, so a typo or a look-alike (``DEFAULT``, ``' default '``) never reads as done.
    later_django's own queues (``__later…``) pass, for the pause to refuse by name."""
    inputs.name(field, name)
    if is_reserved(name) or name in configured_queues():
        return name
    known = known_queue_names()
    if name not in known:
        listed = sorted(n for n in known if not is_reserved(n))
        more = f" and {len(listed) - KNOWN_LISTED} more" if len(listed) > KNOWN_LISTED else ""
        raise inputs.InputError(
            field,
            name,
            f"is not a queue of namespace {later_settings().namespace!r}: not configured "
            f"(a LaterBackend's QUEUES, LATER['QUEUE_LIMITS']) and not seen in its data; "
            f"known queues: {', '.join(listed[:KNOWN_LISTED]) or 'none'}{more}",
        )
    return name
