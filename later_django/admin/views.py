"""The dashboard pages as plain admin views (they need no admin-tools).

Every view runs through ``admin.site.admin_view``: only active staff users
see them (others are sent to the admin login), responses are never cached,
and POSTs are CSRF-checked. The actions are POST only and additionally need
the permission ``later_django.manage_jobs``; without it they answer 403.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from later_django.admin.jobs import (
    check_stage,
    partition_page,
    read_job,
    stage_page,
)
from later_django.admin.panels import dashboard_context
from later_django.core import stages
from later_django.engine import job_actions as actions
from later_django.exceptions import ActionRefused, TablesMissing
from later_django.overview import STAGES, resolve_target
from later_django.storage.tables import naming_missing_tables

MANAGE_PERMISSION = "later_django.manage_jobs"
#: The answer of every page while later_django's tables are missing.
TABLES_MISSING_STATUS = 503


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


def _page(request: HttpRequest, template: str, title: str, **extra: Any) -> TemplateResponse:
    context = {
        **admin.site.each_context(request),
        "title": title,
        "stages": STAGES,
        "can_manage": request.user.has_perm(MANAGE_PERMISSION),
        **extra,
    }
    return TemplateResponse(request, template, context)


def dashboard(request: HttpRequest) -> TemplateResponse:
    """Every panel on one page (the same panels as the admin-tools modules)."""
    return _page(request, "later_django/dashboard.html", "Later jobs", **dashboard_context(request))


def job_list(request: HttpRequest, stage: str) -> TemplateResponse:
    """Jobs in ``stage``, newest first, one cursor page at a time (``?cursor=``)."""
    try:
        check_stage(stage)
    except ValueError as error:
        raise Http404(str(error)) from None
    using, namespace = resolve_target(None, None)
    cursor = request.GET.get("cursor") or None
    try:
        page = stage_page(using, namespace, stage, cursor)
    except ValueError as error:
        raise Http404(str(error)) from None
    return _page(
        request,
        "later_django/job_list.html",
        f"Jobs: {stage}",
        stage=stage,
        page=page,
        cursor=cursor,
    )


def partition_list(request: HttpRequest, topic: str, partition_id: int) -> TemplateResponse:
    """The jobs of one partition, highest sequence first, cursor pages."""
    using, namespace = resolve_target(None, None)
    cursor = request.GET.get("cursor") or None
    try:
        page = partition_page(using, namespace, topic, partition_id, cursor)
    except ValueError as error:
        raise Http404(str(error)) from None
    return _page(
        request,
        "later_django/partition_list.html",
        f"Partition {partition_id} of {topic}",
        topic=topic,
        partition_id=partition_id,
        page=page,
        cursor=cursor,
    )


def job_detail(request: HttpRequest, job_id: str) -> TemplateResponse:
    """One job: task, arguments, timeline, errors, continuations, neighbours."""
    using, namespace = resolve_target(None, None)
    detail = read_job(using, namespace, job_id)
    if detail is None:
        raise Http404(f"job {job_id} does not exist (deleted, or its record expired)")
    return _page(
        request,
        "later_django/job_detail.html",
        f"Job {job_id}",
        job=detail,
        live_stages=stages.LIVE_STAGES,
    )


def _action(
    run: Callable[[str, str, str], Any], done: str, after: Callable[[str], str]
) -> Callable[[HttpRequest, str], HttpResponse]:
    """A POST-only view running ``run(using, namespace, job_id)`` for users with the
    manage permission; it redirects to ``after(job_id)`` with a message."""

    @require_POST
    def view(request: HttpRequest, job_id: str) -> HttpResponse:
        if not request.user.has_perm(MANAGE_PERMISSION):
            raise PermissionDenied(f"changing jobs needs the permission {MANAGE_PERMISSION}")
        using, namespace = resolve_target(None, None)
        try:
            run(using, namespace, job_id)
        except ActionRefused as refused:
            messages.error(request, str(refused))
            return HttpResponseRedirect(reverse("later_django:job_detail", args=[job_id]))
        messages.success(request, done.format(job_id=job_id))
        return HttpResponseRedirect(after(job_id))

    return view


#: What the Cancel button says it did, by what :func:`job_actions.cancel_job` returned.
_CANCELLED_MESSAGES = {
    actions.CANCELLED: "Job {job_id} was cancelled; it will not run.",
    actions.REQUESTED: "Job {job_id} was asked to stop; it is recorded cancelled when it ends.",
    actions.FINISHED: "Job {job_id} had already finished; nothing changed.",
    actions.MISSING: "Job {job_id} does not exist any more; nothing changed.",
    actions.UNREADABLE: "Job {job_id} has a record that cannot be decoded; nothing changed.",
}


@require_http_methods(["GET", "POST"])
def cancel_job(request: HttpRequest, job_id: str) -> HttpResponse:
    """GET: a confirmation page naming the job and what a cancel will do; POST (CSRF):
    the cancel. Both need the manage permission."""
    if not request.user.has_perm(MANAGE_PERMISSION):
        raise PermissionDenied(f"changing jobs needs the permission {MANAGE_PERMISSION}")
    using, namespace = resolve_target(None, None)
    if request.method == "POST":
        try:
            done = actions.cancel_job(using, namespace, job_id)
        except ActionRefused as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, _CANCELLED_MESSAGES[done].format(job_id=job_id))
        return HttpResponseRedirect(_detail_url(job_id))
    detail = read_job(using, namespace, job_id)
    if detail is None:
        raise Http404(f"job {job_id} does not exist (deleted, or its record expired)")
    return _page(request, "later_django/job_cancel.html", f"Cancel job {job_id}", job=detail)


def _detail_url(job_id: str) -> str:
    return reverse("later_django:job_detail", args=[job_id])


retry_job = _action(actions.retry_failed, "Job {job_id} was enqueued again.", _detail_url)
run_job_now = _action(actions.run_now, "Job {job_id} was enqueued to run now.", _detail_url)
delete_job = _action(
    actions.delete_job,
    "Job {job_id} was deleted.",
    lambda _job_id: reverse("later_django:dashboard"),
)
