"""The job list pages' views: a stage's jobs (filters, search, cursor pages), the bulk
actions' confirmation and run, and one partition's jobs.

The reads are :mod:`~later_django.admin.jobs`' (keyset pages, never a count of the
jobs), the filters :mod:`~later_django.admin.job_filters`', the bulk actions
:mod:`~later_django.admin.bulk`'s; the permission and confirmation rules are
:mod:`~later_django.admin.pages`'.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from later_django.admin import bulk
from later_django.admin.job_filters import PREFIX_MARK, RELATIVE_TIMES, FilterError, ListFilter
from later_django.admin.jobs import (
    check_stage,
    job_exists,
    partition_page,
    stage_page,
    stage_total,
)
from later_django.admin.pages import (
    CONFIRM_FIELD,
    CONFIRM_VALUE,
    confirmation_page,
    detail_url,
    render_page,
    require_manage,
)
from later_django.core.clock import now_ms
from later_django.overview.target import resolve_target

#: The answer of a job list whose filter value is not valid (the page names it).
BAD_FILTER_STATUS = 400
LIST_TEMPLATE = "later_django/job_list.html"
#: Search text shaped like a job id (a ULID: 26 characters of Crockford base 32).
JOB_ID_SHAPE = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}", re.IGNORECASE)


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
        return HttpResponseRedirect(detail_url(text))
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
    require_manage(request)
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
    return confirmation_page(
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
