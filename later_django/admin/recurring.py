"""The recurring page: every recurring job with its next run and its last runs, and its
Disable/Enable/Run now buttons (POST, CSRF, ``later_django.manage_jobs``).

Bounded by the definitions, never by the jobs: the definitions of the namespace
(:func:`later_django.engine.recurring.list_recurring`, one key range), at most
:data:`SHOWN` of them, and the records of their remembered occurrences
(``recent_job_ids``, at most ``RECENT_RUNS`` each) read by key in one statement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from later_django import inputs
from later_django.admin.pages import query_value, render_page, require_manage
from later_django.admin.units import NONE_TEXT, human_duration, when
from later_django.api import disable_recurring, enable_recurring, run_recurring_now
from later_django.compat.tasks import InvalidTask
from later_django.conf import later_settings
from later_django.core import clock
from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record
from later_django.engine.recurring import RecurringDefinition, list_recurring
from later_django.engine.recurring_pass import NEVER_MS
from later_django.exceptions import LaterError, RecordDecodeError
from later_django.storage.stores import stores_for

#: Definitions listed on the page (the rest are counted, not shown).
SHOWN = 500
#: What a run whose record is gone (deleted, or expired after its retention) shows.
GONE = "gone"
#: What a run whose record cannot be decoded shows (its job page names the error).
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class RecentRun:
    """One remembered occurrence: its stage now and, once finished, how long it ran."""

    job_id: str
    stage: str
    duration: str


@dataclass(frozen=True)
class RecurringRow:
    """One line of the recurring page."""

    id: str
    task_path: str
    cron: str
    timezone: str
    sequential: bool
    source: str
    enabled: bool
    next_run: datetime | None
    #: ``in 42 s``; the en dash when disabled or when the schedule has no tick left.
    next_in: str
    last_run: datetime | None
    last_error: str | None
    recent: list[RecentRun]


@dataclass(frozen=True)
class RecurringPage:
    rows: list[RecurringRow]
    #: Definitions beyond :data:`SHOWN`, not listed.
    hidden: int


def recent_run(job_id: str, record: JobRecord | str | None) -> RecentRun:
    """The run of ``job_id`` as its record tells it (``None``: the record is gone; a
    string: it could not be decoded)."""
    if record is None:
        return RecentRun(job_id, GONE, NONE_TEXT)
    if isinstance(record, str):
        return RecentRun(job_id, UNREADABLE, NONE_TEXT)
    ran = None
    if record.finished_at_ms is not None and record.started_at_ms is not None:
        ran = record.finished_at_ms - record.started_at_ms
    return RecentRun(job_id, record.stage, human_duration(ran))


def recurring_row(
    definition: RecurringDefinition, records: dict[str, JobRecord | str], now_ms: int
) -> RecurringRow:
    """The row of ``definition``, its recent runs looked up in ``records`` (by job id;
    a string is the decode error of a record that could not be read)."""
    scheduled = definition.enabled and definition.next_run_ms < NEVER_MS
    return RecurringRow(
        id=definition.id,
        task_path=definition.task_path,
        cron=definition.cron,
        timezone=definition.timezone,
        sequential=definition.sequential,
        source=definition.source,
        enabled=definition.enabled,
        next_run=when(definition.next_run_ms) if scheduled else None,
        next_in=f"in {human_duration(definition.next_run_ms - now_ms)}" if scheduled else NONE_TEXT,
        last_run=when(definition.last_run_ms),
        last_error=definition.last_error,
        recent=[recent_run(job_id, records.get(job_id)) for job_id in definition.recent_job_ids],
    )


def recurring_page(now_ms: int | None = None) -> RecurringPage:
    """Every recurring job of the namespace in id order (at most :data:`SHOWN`)."""
    settings = later_settings()
    stores = stores_for(settings.database)
    now = clock.now_ms() if now_ms is None else now_ms
    definitions = list_recurring(stores=stores, namespace=settings.namespace)
    shown = definitions[:SHOWN]
    keys = {
        job_key(settings.namespace, job_id): job_id
        for definition in shown
        for job_id in definition.recent_job_ids
    }
    records: dict[str, JobRecord | str] = {}
    for key, raw in stores.kv.get_many(list(keys)).items():
        try:
            records[keys[key]] = decode_record(raw)
        except RecordDecodeError as error:
            records[keys[key]] = str(error)
    rows = [recurring_row(definition, records, now) for definition in shown]
    return RecurringPage(rows, len(definitions) - len(shown))


def recurring_list(request: HttpRequest) -> TemplateResponse:
    """Every recurring job: schedule, next run, its last runs with their outcomes,
    Enable/Disable and Run now. Bounded by the definitions (at most
    :data:`~later_django.admin.recurring.SHOWN`) and one read of their last runs'
    records by key (:mod:`later_django.admin.recurring`)."""
    return render_page(
        request,
        "later_django/recurring_list.html",
        "Recurring jobs",
        later_page="recurring",
        recurring=recurring_page(),
    )


def _recurring_action(
    run: Callable[[str], Any], done: str, unchanged: str = ""
) -> Callable[[HttpRequest], HttpResponse]:
    """A POST-only view (CSRF, manage permission) running ``run(id)`` on the form's
    ``recurring_id`` (given once, no NUL, at most 200 characters, else 400) and
    redirecting to the recurring page with a message: ``unchanged``
    when ``run`` returned ``False``, else ``done`` (formatted with ``id`` and ``result``,
    what ``run`` returned)."""

    @require_POST
    def view(request: HttpRequest) -> HttpResponse:
        require_manage(request)
        recurring_id = inputs.text(
            "recurring_id", query_value(request.POST, "recurring_id"), max_length=inputs.NAME_LENGTH
        )
        try:
            result = run(recurring_id)
        except LookupError as error:
            messages.error(request, str(error.args[0]))
        except (LaterError, InvalidTask, TypeError, ValueError) as error:
            # A run now whose task cannot be enqueued (unregistered, not ours, bad args).
            messages.error(request, f"recurring job {recurring_id!r} did not run: {error}")
        else:
            text = unchanged if result is False else done
            messages.success(request, text.format(id=recurring_id, result=result))
        return HttpResponseRedirect(reverse("later_django:recurring_list"))

    return view


recurring_disable = _recurring_action(
    disable_recurring,
    "Recurring job {id!r} is disabled: no tick runs until it is enabled.",
    "Recurring job {id!r} was already disabled; nothing changed.",
)
recurring_enable = _recurring_action(
    enable_recurring,
    "Recurring job {id!r} is enabled: it runs from its next tick (missed ticks are skipped).",
    "Recurring job {id!r} was already enabled; nothing changed.",
)
recurring_run_now = _recurring_action(
    run_recurring_now, "Recurring job {id!r} was enqueued to run now as job {result}."
)
