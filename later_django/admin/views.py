"""The dashboard pages as plain admin views (they need no admin-tools).

Every view runs through ``admin.site.admin_view``: only active staff users
see them (others are sent to the admin login), responses are never cached,
and POSTs are CSRF-checked. The actions are POST only and additionally need
the permission ``later_django.manage_jobs``; without it they answer 403.
The destructive ones (cancel, delete, and every bulk action) first show a
confirmation page (GET, the same permission), and the delete's and the bulk
actions' POST must carry ``confirm=yes``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_POST

from later_django.admin import bulk
from later_django.admin.job_filters import PREFIX_MARK, RELATIVE_TIMES, FilterError, ListFilter
from later_django.admin.job_tree import tree_svg
from later_django.admin.jobs import (
    check_stage,
    job_exists,
    partition_page,
    read_job,
    stage_page,
    stage_total,
)
from later_django.admin.panels import dashboard_context
from later_django.admin.queues import queue_page
from later_django.admin.recurring import recurring_page
from later_django.admin.workers import worker_page
from later_django.api import (
    disable_recurring,
    enable_recurring,
    pause_queue,
    resume_queue,
    run_recurring_now,
)
from later_django.compat.tasks import InvalidTask
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.engine.job_actions import one_job
from later_django.engine.job_actions.record_checks import (
    CANCELLED,
    FINISHED,
    MISSING,
    REQUESTED,
    UNREADABLE,
)
from later_django.exceptions import ActionRefused, LaterError, TablesMissing
from later_django.overview import STAGES, resolve_target
from later_django.storage.tables import naming_missing_tables

MANAGE_PERMISSION = "later_django.manage_jobs"
#: The field (and value) a delete's POST must carry: the confirmation page's button.
CONFIRM_FIELD, CONFIRM_VALUE = "confirm", "yes"
#: The answer to a delete POST without the confirmation (the page is shown again).
UNCONFIRMED_STATUS = 400
#: The answer of every page while later_django's tables are missing.
TABLES_MISSING_STATUS = 503
#: The answer of a job list whose filter value is not valid (the page names it).
BAD_FILTER_STATUS = 400
LIST_TEMPLATE = "later_django/job_list.html"
#: Search text shaped like a job id (a ULID: 26 characters of Crockford base 32).
JOB_ID_SHAPE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}", re.IGNORECASE)


def answering_missing_tables(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view``, answering 503 with "later_django's tables are missing: run manage.py
    migrate" (text) when its reads meet a database that was not migrated."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        using, _ = resolve_target(None, None)
        try:
            with naming_missing_tables(using):
                return view(request, *args, **kwargs)
        except TablesMissing as error:
            return HttpResponse(
                str(error), status=TABLES_MISSING_STATUS, content_type="text/plain; charset=utf-8"
            )

    return wrapped


def render_page(request: HttpRequest, template: str, title: str, **extra: Any) -> TemplateResponse:
    """A dashboard page: the admin's context, the stages, whether the user may manage
    jobs, and ``extra``."""
    context = {
        **admin.site.each_context(request),
        "title": title,
        "stages": STAGES,
        "can_manage": request.user.has_perm(MANAGE_PERMISSION),
        **extra,
    }
    return TemplateResponse(request, template, context)


def _confirmation_page(
    request: HttpRequest, template: str, title: str, **extra: Any
) -> TemplateResponse:
    """The confirmation page of a destructive or bulk action: its form posts
    ``confirm=yes``. Shown for a GET, and for a POST without that field with status
    400 ("nothing was done"), so a one-click form or a forged POST changes nothing."""
    response = render_page(
        request,
        template,
        title,
        unconfirmed=request.method == "POST",
        confirm_field=CONFIRM_FIELD,
        confirm_value=CONFIRM_VALUE,
        **extra,
    )
    if request.method == "POST":
        response.status_code = UNCONFIRMED_STATUS
    return response


def dashboard(request: HttpRequest) -> TemplateResponse:
    """Every panel on one page (the same panels as the admin-tools modules)."""
    return render_page(
        request,
        "later_django/dashboard.html",
        "Later jobs",
        later_page="dashboard",
        **dashboard_context(request),
    )


def job_list(request: HttpRequest, stage: str) -> HttpResponse:
    """Jobs in ``stage``, newest first, one cursor page at a time (``?cursor=``),
    filtered by the GET parameters of :mod:`later_django.admin.job_filters`; ``q``
    searches (an exact job id opens its page, other text is a task path prefix);
    ``bulk=<action>`` opens that action's confirmation page for all matching.
    A filter value that is not valid is named on the page (400), with no rows."""
    try:
        check_stage(stage)
    except ValueError as error:
        raise Http404(str(error)) from None
    search = request.GET.get("q", "").strip()
    if search:
        return _search(request, stage, search)
    list_filter = ListFilter.from_query(request.GET)
    if request.GET.get("bulk"):
        # A link that asks for a bulk action on all the list matches (the failure
        # groups' "Retry all…"): its confirmation page, which acts only when confirmed.
        wanted = {"action": request.GET["bulk"], "scope": bulk.MATCHING, **list_filter.params()}
        return HttpResponseRedirect(
            f"{reverse('later_django:job_bulk', args=[stage])}?{urlencode(wanted)}"
        )
    using, namespace = resolve_target(None, None)
    cursor = request.GET.get("cursor") or None
    context: dict[str, Any] = {
        "stage": stage,
        "cursor": cursor,
        "list_filter": list_filter,
        "filter_query": urlencode(list_filter.params()),
        "filter_words": list_filter.in_words(),
        "relative_times": RELATIVE_TIMES,
        "bulk_actions": bulk.actions_for(stage),
    }
    try:
        selection = list_filter.selection(stage, now_ms())
    except FilterError as error:
        response = render_page(
            request, LIST_TEMPLATE, f"Jobs: {stage}", filter_error=str(error), **context
        )
        response.status_code = BAD_FILTER_STATUS
        return response
    try:
        page = stage_page(using, namespace, selection, cursor)
    except ValueError as error:
        raise Http404(str(error)) from None
    total = None if not list_filter.is_empty() else stage_total(using, namespace, stage)
    return render_page(request, LIST_TEMPLATE, f"Jobs: {stage}", page=page, total=total, **context)


def _search(request: HttpRequest, stage: str, text: str) -> HttpResponse:
    """The search box: a job id that exists opens the job's page; text shaped like a
    job id (a ULID) that does not is "no job with id …"; other text lists the stage's
    jobs whose task path starts with it (the filters kept)."""
    using, namespace = resolve_target(None, None)
    if job_exists(using, namespace, text):
        return HttpResponseRedirect(_detail_url(text))
    kept = ListFilter.from_query(request.GET).params()
    if JOB_ID_SHAPE.fullmatch(text):
        messages.error(request, f"No job with id {text} (deleted, or past its retention).")
    else:
        kept["task"] = text if text.endswith(PREFIX_MARK) else text + PREFIX_MARK
    url = reverse("later_django:job_list", args=[stage])
    return HttpResponseRedirect(f"{url}?{urlencode(kept)}" if kept else url)


@require_http_methods(["GET", "POST"])
def job_bulk(request: HttpRequest, stage: str) -> HttpResponse:
    """A bulk action on jobs of ``stage`` (:mod:`later_django.admin.bulk`). GET (the
    list's form), or a POST without ``confirm=yes`` (then 400): the confirmation page
    with the count a dry run found, the filter in words and what will happen. A POST
    with ``confirm=yes`` (CSRF) runs it and sends the user back to the list with the
    outcome; an "all matching" run that stopped at its bound comes back to the
    confirmation page to continue. Both need the manage permission."""
    _require_manage(request)
    try:
        check_stage(stage)
    except ValueError as error:
        raise Http404(str(error)) from None
    data = request.POST if request.method == "POST" else request.GET
    list_url = _list_url(stage, ListFilter.from_query(data))
    try:
        wanted = bulk.BulkRequest.from_query(stage, data)
        wanted.selection(now_ms())  # a bad filter value raises here, before any read
    except (bulk.BulkRequestError, FilterError) as error:
        messages.error(request, f"Nothing was done: {error}.")
        return HttpResponseRedirect(list_url)
    using, namespace = resolve_target(None, None)
    confirmed = request.POST.get(CONFIRM_FIELD) == CONFIRM_VALUE
    if request.method == "POST" and confirmed:
        return _run_bulk(request, wanted, using, namespace, list_url)
    fixed = wanted.fixed_at(now_ms())
    preview = fixed.run(using, namespace, now_ms(), dry_run=True)
    return _confirmation_page(
        request,
        "later_django/job_bulk.html",
        f"{wanted.action.label} {stage} jobs",
        stage=stage,
        bulk=fixed,
        preview=preview,
        filter_words=fixed.list_filter.in_words(),
        rows_per_request_text=f"{bulk.ROWS_PER_REQUEST:,}",
        batch_size=bulk.BATCH_SIZE,
        list_url=list_url,
    )


def _run_bulk(
    request: HttpRequest, wanted: bulk.BulkRequest, using: str, namespace: str, list_url: str
) -> HttpResponse:
    """Runs a confirmed bulk request; the outcome as messages, then the list, or the
    confirmation page of the next part when the run stopped at its bound."""
    outcome = wanted.run(using, namespace, now_ms(), dry_run=False)
    messages.success(request, bulk.outcome_text(wanted.action, outcome))
    for refusal in outcome.refusals:
        messages.warning(request, refusal)
    if outcome.resume_cursor is None:
        return HttpResponseRedirect(list_url)
    messages.warning(
        request,
        f"Stopped after looking at {bulk.ROWS_PER_REQUEST:,} jobs, the bound of one "
        "request; confirm below to go on with the next ones.",
    )
    following = urlencode(wanted.with_cursor(outcome.resume_cursor).fields())
    return HttpResponseRedirect(
        f"{reverse('later_django:job_bulk', args=[wanted.stage])}?{following}"
    )


def _list_url(stage: str, list_filter: ListFilter) -> str:
    url = reverse("later_django:job_list", args=[stage])
    query = urlencode(list_filter.params())
    return f"{url}?{query}" if query else url


def partition_list(request: HttpRequest, topic: str, partition_id: int) -> TemplateResponse:
    """The jobs of one partition, highest sequence first, cursor pages."""
    using, namespace = resolve_target(None, None)
    cursor = request.GET.get("cursor") or None
    try:
        page = partition_page(using, namespace, topic, partition_id, cursor)
    except ValueError as error:
        raise Http404(str(error)) from None
    return render_page(
        request,
        "later_django/partition_list.html",
        f"Partition {partition_id} of {topic}",
        topic=topic,
        partition_id=partition_id,
        page=page,
        cursor=cursor,
    )


def job_detail(request: HttpRequest, job_id: str) -> TemplateResponse:
    """One job: task, arguments, when it runs, its attempts (duration, worker, error),
    timeline, errors, its continuation tree (SVG), partition neighbours."""
    using, namespace = resolve_target(None, None)
    detail = read_job(using, namespace, job_id)
    if detail is None:
        raise Http404(f"job {job_id} does not exist (deleted, or its record expired)")
    tree = None
    if detail.tree is not None:
        # tree_svg escapes every text it writes.
        tree = mark_safe(tree_svg(detail.tree, _detail_url))
    return render_page(
        request,
        "later_django/job_detail.html",
        f"Job {job_id}",
        job=detail,
        tree_svg=tree,
        live_stages=stages.LIVE_STAGES,
    )


def _require_manage(request: HttpRequest) -> None:
    """PermissionDenied (403) unless the user may change jobs and queues."""
    if not request.user.has_perm(MANAGE_PERMISSION):
        raise PermissionDenied(f"changing jobs needs the permission {MANAGE_PERMISSION}")


def _action(
    run: Callable[[str, str, str], Any], done: str, after: Callable[[str], str]
) -> Callable[[HttpRequest, str], HttpResponse]:
    """A POST-only view running ``run(using, namespace, job_id)`` for users with the
    manage permission; it redirects to ``after(job_id)`` with a message."""

    @require_POST
    def view(request: HttpRequest, job_id: str) -> HttpResponse:
        _require_manage(request)
        using, namespace = resolve_target(None, None)
        try:
            run(using, namespace, job_id)
        except ActionRefused as refused:
            messages.error(request, str(refused))
            return HttpResponseRedirect(reverse("later_django:job_detail", args=[job_id]))
        messages.success(request, done.format(job_id=job_id))
        return HttpResponseRedirect(after(job_id))

    return view


#: What the Cancel button says it did, by what
#: :func:`~later_django.engine.job_actions.one_job.cancel_job` returned.
_CANCELLED_MESSAGES = {
    CANCELLED: "Job {job_id} was cancelled; it will not run.",
    REQUESTED: "Job {job_id} was asked to stop; it is recorded cancelled when it ends.",
    FINISHED: "Job {job_id} had already finished; nothing changed.",
    MISSING: "Job {job_id} does not exist any more; nothing changed.",
    UNREADABLE: "Job {job_id} has a record that cannot be decoded; nothing changed.",
}


@require_http_methods(["GET", "POST"])
def cancel_job(request: HttpRequest, job_id: str) -> HttpResponse:
    """GET: a confirmation page naming the job and what a cancel will do; POST (CSRF):
    the cancel. Both need the manage permission."""
    _require_manage(request)
    using, namespace = resolve_target(None, None)
    if request.method == "POST":
        try:
            done = one_job.cancel_job(using, namespace, job_id)
        except ActionRefused as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, _CANCELLED_MESSAGES[done].format(job_id=job_id))
        return HttpResponseRedirect(_detail_url(job_id))
    detail = read_job(using, namespace, job_id)
    if detail is None:
        raise Http404(f"job {job_id} does not exist (deleted, or its record expired)")
    return render_page(request, "later_django/job_cancel.html", f"Cancel job {job_id}", job=detail)


def _detail_url(job_id: str) -> str:
    return reverse("later_django:job_detail", args=[job_id])


retry_job = _action(one_job.retry_failed, "Job {job_id} was enqueued again.", _detail_url)
run_job_now = _action(one_job.run_now, "Job {job_id} was enqueued to run now.", _detail_url)


@require_http_methods(["GET", "POST"])
def delete_job(request: HttpRequest, job_id: str) -> HttpResponse:
    """GET: a confirmation page naming the job and what a delete removes; POST (CSRF)
    with ``confirm=yes``: the delete. A POST without it deletes nothing and shows the
    confirmation page again (400), so an old one-click form or a forged POST does
    not delete. Both need the manage permission."""
    _require_manage(request)
    using, namespace = resolve_target(None, None)
    confirmed = request.POST.get(CONFIRM_FIELD) == CONFIRM_VALUE
    if request.method == "POST" and confirmed:
        try:
            one_job.delete_job(using, namespace, job_id)
        except ActionRefused as refused:
            messages.error(request, str(refused))
            return HttpResponseRedirect(_detail_url(job_id))
        messages.success(request, f"Job {job_id} was deleted.")
        return HttpResponseRedirect(reverse("later_django:dashboard"))
    detail = read_job(using, namespace, job_id)
    if detail is None:
        raise Http404(f"job {job_id} does not exist (deleted, or its record expired)")
    return _confirmation_page(
        request,
        "later_django/job_delete.html",
        f"Delete job {job_id}",
        job=detail,
        live_stages=stages.LIVE_STAGES,
    )


# --- queues and workers ---


def queue_list(request: HttpRequest) -> TemplateResponse:
    """Every queue of the namespace: ready and running jobs, the oldest ready job's age,
    the pause (since when, by whom), the configured limits, Pause/Resume buttons.

    Bounded by small tables, never by the number of jobs
    (:func:`later_django.overview.read_queues`): the live ``later_worker`` rows, the
    ``later_queue_depth`` counters, the paused keys of ``later_storage`` (at most
    1,000), and per queue holding ready messages one walk of the queue's index that
    stops at its first ready message."""
    return render_page(
        request, "later_django/queue_list.html", "Queues", later_page="queues", queues=queue_page()
    )


def worker_list(request: HttpRequest) -> TemplateResponse:
    """Every live worker process and the jobs it runs now (task, attempt, running for).

    Bounded: the live ``later_worker`` rows (one per process), their execution leases
    (``later_job_execution``, one row per running job) at most
    :data:`~later_django.admin.workers.RUNNING_SHOWN` over all workers, and those jobs'
    records read by key in one statement (:mod:`later_django.admin.workers`)."""
    return render_page(
        request,
        "later_django/worker_list.html",
        "Workers",
        later_page="workers",
        workers=worker_page(),
    )


def _queue_action(
    run: Callable[[str, str], bool], done: str, unchanged: str
) -> Callable[[HttpRequest], HttpResponse]:
    """A POST-only view (CSRF, manage permission) running ``run(queue, username)`` on the
    form's ``queue`` and redirecting to the queues page with a message."""

    @require_POST
    def view(request: HttpRequest) -> HttpResponse:
        _require_manage(request)
        name = request.POST.get("queue", "")
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


# --- recurring jobs ---


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
    ``recurring_id`` and redirecting to the recurring page with a message: ``unchanged``
    when ``run`` returned ``False``, else ``done`` (formatted with ``id`` and ``result``,
    what ``run`` returned)."""

    @require_POST
    def view(request: HttpRequest) -> HttpResponse:
        _require_manage(request)
        recurring_id = request.POST.get("recurring_id", "")
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
