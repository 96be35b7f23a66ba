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

from later_django import inputs
from later_django.admin import bulk
from later_django.admin.job_filters import PREFIX_MARK, RELATIVE_TIMES, FilterError, ListFilter
from later_django.admin.jobs import (
    check_partition,
    check_stage,
    job_exists,
    partition_page,
    stage_page,
    stage_total,
)
from later_django.admin.pages import (
    confirmation_page,
    detail_url,
    is_confirmed,
    path_name,
    path_value,
    query_value,
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
#: The longest search text: a job id or a task path, and a prefix mark.
SEARCH_LENGTH = inputs.NAME_LENGTH + 1


def job_list(request: HttpRequest, stage: str) -> HttpResponse:
    """Jobs in ``stage``, newest first, one cursor page at a time (``?cursor=``),
    filtered by the GET parameters of :mod:`later_django.admin.job_filters`; ``q``
    searches (an exact job id opens its page, other text is a task path prefix);
    ``bulk=<action>`` opens that action's confirmation page for all matching.
    A filter value that is not valid is named on the page (400), with no rows; a
    parameter given twice, holding a NUL, over-long, or a cursor that cannot be read
    is refused (400, :func:`~later_django.admin.pages.refusing_bad_input`)."""
    try:
        check_stage(stage)
    except ValueError as error:
        raise Http404(str(error)) from None
    list_filter = ListFilter.from_query(request.GET)
    search = inputs.filter_value("q", query_value(request.GET, "q"), max_length=SEARCH_LENGTH)
    if search:
        return _search(stage, list_filter, search, request)
    wanted_action = query_value(request.GET, "bulk")
    if wanted_action:
        # A link that asks for a bulk action on all the list matches (the failure
        # groups' "Retry all…"): its confirmation page, which acts only when confirmed.
        if wanted_action not in bulk.BULK_ACTIONS:
            raise inputs.InputError(
                "bulk", wanted_action, f"is not one of {list(bulk.BULK_ACTIONS)}"
            )
        wanted = {"action": wanted_action, "scope": bulk.MATCHING, **list_filter.params()}
        return HttpResponseRedirect(
            f"{reverse('later_django:job_bulk', args=[stage])}?{urlencode(wanted)}"
        )
    using, namespace = resolve_target(None, None)
    cursor = bulk.checked_cursor(stage, query_value(request.GET, "cursor"))
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
    page = stage_page(using, namespace, selection, cursor)
    total = None if not list_filter.is_empty() else stage_total(using, namespace, stage)
    return render_page(request, LIST_TEMPLATE, f"Jobs: {stage}", page=page, total=total, **context)


def _search(stage: str, list_filter: ListFilter, text: str, request: HttpRequest) -> HttpResponse:
    """The search box: a job id that exists opens the job's page; text shaped like a
    job id (a ULID) that does not is "no job with id …"; other text lists the stage's
    jobs whose task path starts with it (the filters kept)."""
    using, namespace = resolve_target(None, None)
    if job_exists(using, namespace, text):
        return HttpResponseRedirect(detail_url(text))
    kept = list_filter.params()
    if JOB_ID_SHAPE.fullmatch(text):
        messages.error(request, f"No job with id {text} (deleted, or past its retention).")
    else:
        kept["task"] = text if text.endswith(PREFIX_MARK) else text + PREFIX_MARK
    url = reverse("later_django:job_list", args=[stage])
    return HttpResponseRedirect(f"{url}?{urlencode(kept)}" if kept else url)


@require_http_methods(["GET", "POST"])
def job_bulk(request: HttpRequest, stage: str) -> HttpResponse:
    """A bulk action on jobs of ``stage`` (:mod:`later_django.admin.bulk`). GET (the
    list's form), or a POST without exactly one ``confirm=yes`` (then 400): the
    confirmation page with the count a dry run found, the filter in words and what
    will happen. A POST with ``confirm=yes`` (CSRF) runs it and sends the user back
    to the list with the outcome; an "all matching" run that stopped at its bound
    comes back to the confirmation page to continue. Both need the manage
    permission. A field that breaks its rule (given twice, a NUL, over-long, an
    unreadable cursor) is refused with 400 before anything is read."""
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
    if is_confirmed(request):
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
    """The jobs of one partition, highest sequence first, cursor pages (``?cursor=``:
    the last sequence shown). A topic that is neither configured, recorded nor holding
    jobs, or a partition beyond its count (or beyond what the column holds), is a 404
    naming it; an unreadable cursor a 400."""
    topic = path_name("topic", topic)
    path_value(
        lambda field, value: inputs.integer(field, value, low=0, high=inputs.INT_MAX),
        "partition",
        str(partition_id),
    )
    after = inputs.sequence_cursor("cursor", query_value(request.GET, "cursor"))
    cursor = None if after is None else str(after)
    using, namespace = resolve_target(None, None)
    page = partition_page(using, namespace, topic, partition_id, cursor)
    if not page.rows:
        check_partition(using, namespace, topic, partition_id)
    return render_page(
        request,
        "later_django/partition_list.html",
        f"Partition {partition_id} of {topic}",
        topic=topic,
        partition_id=partition_id,
        page=page,
        cursor=cursor,
    )
