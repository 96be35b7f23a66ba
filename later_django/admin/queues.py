"""The queues page: one row per queue of the namespace, and its Pause/Resume buttons
(POST, CSRF, ``later_django.manage_jobs``).

The figures are :func:`later_django.overview.queues.read_queues` (what ``later_status`` and
``later_queue list`` print): ready messages from the trigger-kept depth counters, the
oldest ready message's age by a walk that stops at the first ready message (only for
queues holding some), the pauses (one key range of ``later_storage``), and the jobs
running now from the live workers' rows. The configured limits come from
``LATER["QUEUE_LIMITS"]``. The rows are that module's one answer about which queues
there are, the same as ``later_queue list``, ``later_status`` and the metrics view:
queues named in ``TASKS`` or ``QUEUE_LIMITS`` are listed even while they hold nothing
(so that they can be paused before jobs arrive), and so is every queue with messages,
a pause or running jobs.

Throughput per queue is the attempts that ended (succeeded or failing) in the current
minute so far and in the hour ending with it (the task pages' hour), read from
``later_task_minute`` only: two grouped reads of the windows' minute rows, never the jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from later_django.admin.chart import chart_window
from later_django.admin.pages import query_value, render_page, require_manage
from later_django.admin.units import (
    NONE_TEXT,
    human_age,
    human_count,
    human_duration,
    human_rate,
    when,
)
from later_django.api import pause_queue, resume_queue
from later_django.conf import later_settings
from later_django.core import clock
from later_django.core.keys import is_reserved
from later_django.core.limits import QueueLimit
from later_django.overview.figures import QueueFigure
from later_django.overview.queues import known_queue, read_queues
from later_django.storage.stores import stores_for
from later_django.storage.types import QueueAttempts


@dataclass(frozen=True)
class QueueRow:
    """One line of the queues page."""

    name: str
    ready: int
    running: int
    oldest_ready: str
    paused: bool
    paused_at: datetime | None
    paused_for: str
    paused_by: str
    concurrency: str
    rate: str
    #: Attempts that succeeded or failed in the current minute so far, and in the hour
    #: ending with it; the failing ones of that hour (human counts: ``1.2k``).
    done_minute: str
    done_hour: str
    failing_hour: str
    #: later_django's own queues (``__later…``) cannot be paused.
    can_pause: bool


@dataclass(frozen=True)
class QueuePage:
    namespace: str
    using: str
    rows: list[QueueRow]
    #: Live workers the running counts come from.
    live_workers: int


@dataclass(frozen=True)
class QueueThroughput:
    """Attempts per queue name in the current minute and in the hour ending with it
    (a queue absent from either had none there)."""

    minute: dict[str, QueueAttempts]
    hour: dict[str, QueueAttempts]

    def of(self, queue_name: str) -> tuple[QueueAttempts, QueueAttempts]:
        """``(minute, hour)`` attempts of ``queue_name``, zeros where it had none."""
        none = QueueAttempts(queue_name, succeeded=0, failing=0)
        return self.minute.get(queue_name, none), self.hour.get(queue_name, none)


def read_throughput(using: str, namespace: str, now_ms: int) -> QueueThroughput:
    """Each queue's attempts in the minute holding ``now_ms`` and in the hour of whole
    minutes ending with it: two grouped reads of ``later_task_minute``."""
    hour = chart_window("hour", now_ms)
    metrics = stores_for(using).metrics

    def by_queue(first_bucket: int) -> dict[str, QueueAttempts]:
        rows = metrics.queue_attempts(namespace, first_bucket, hour.last_bucket)
        return {row.queue_name: row for row in rows}

    return QueueThroughput(minute=by_queue(hour.last_bucket), hour=by_queue(hour.first_bucket))


def queue_row(
    figure: QueueFigure, limit: QueueLimit | None, throughput: QueueThroughput, now_ms: int
) -> QueueRow:
    """The row of one queue's figure, its configured limit (``None``: no limit) and
    its throughput."""
    name = figure.queue_name
    paused = figure.paused_at_ms is not None
    minute, hour = throughput.of(name)
    return QueueRow(
        name=name,
        ready=figure.ready,
        running=figure.running,
        oldest_ready=human_duration(figure.oldest_ready_age_ms),
        paused=paused,
        paused_at=when(figure.paused_at_ms) if paused else None,
        paused_for=human_age(now_ms, figure.paused_at_ms) if paused else NONE_TEXT,
        paused_by=figure.paused_by or "",
        concurrency=NONE_TEXT
        if limit is None or limit.concurrency is None
        else str(limit.concurrency),
        rate=NONE_TEXT if limit is None else human_rate(limit.rate_count, limit.rate_window_ms),
        done_minute=human_count(minute.done),
        done_hour=human_count(hour.done),
        failing_hour=human_count(hour.failing),
        can_pause=not is_reserved(name),
    )


def queue_page(now_ms: int | None = None) -> QueuePage:
    """Every queue of the namespace (:func:`~later_django.overview.queues.read_queues`:
    configured, or with messages, running jobs or a pause), by name."""
    settings = later_settings()
    now = clock.now_ms() if now_ms is None else now_ms
    figures, workers = read_queues(now_ms=now)
    throughput = read_throughput(settings.database, settings.namespace, now)
    limits = settings.queue_limits
    rows = [queue_row(figure, limits.get(figure.queue_name), throughput, now) for figure in figures]
    return QueuePage(settings.namespace, settings.database, rows, len(workers))


def queue_list(request: HttpRequest) -> TemplateResponse:
    """Every queue of the namespace: ready and running jobs, the oldest ready job's age,
    the pause (since when, by whom), the configured limits, Pause/Resume buttons.

    Bounded by small tables, never by the number of jobs
    (:func:`later_django.overview.queues.read_queues`): the live ``later_worker`` rows, the
    ``later_queue_depth`` counters, the paused keys of ``later_storage`` (at most
    1,000), and per queue holding ready messages one walk of the queue's index that
    stops at its first ready message."""
    return render_page(
        request, "later_django/queue_list.html", "Queues", later_page="queues", queues=queue_page()
    )


def _queue_action(
    run: Callable[[str, str], bool], done: str, unchanged: str
) -> Callable[[HttpRequest], HttpResponse]:
    """A POST-only view (CSRF, manage permission) running ``run(queue, username)`` on the
    form's ``queue`` and redirecting to the queues page with a message. The ``queue``
    is given once and names a known queue (:func:`~later_django.overview.queues.known_queue`),
    or nothing is done (400, the known queues listed)."""

    @require_POST
    def view(request: HttpRequest) -> HttpResponse:
        require_manage(request)
        name = known_queue("queue", query_value(request.POST, "queue"))
        try:
            changed = run(name, request.user.get_username())
        except ValueError as error:
            messages.error(request, str(error))
        else:
            text = done if changed else unchanged
            messages.success(request, text.format(queue=name))
        return HttpResponseRedirect(reverse("later_django:queue_list"))

    return view


pause_queue_view = _queue_action(
    lambda name, by: pause_queue(name, by=by),
    "Queue {queue!r} is paused: no worker claims its jobs until it is resumed.",
    "Queue {queue!r} was already paused; nothing changed.",
)
resume_queue_view = _queue_action(
    lambda name, _by: resume_queue(name),
    "Queue {queue!r} is resumed.",
    "Queue {queue!r} was not paused; nothing changed.",
)
