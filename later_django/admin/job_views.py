"""One job's page and its buttons: Retry, Run now, Cancel (with a confirmation page)
and Delete (confirmed by exactly one ``confirm=yes``), each POST only, CSRF-checked and needing
``later_django.manage_jobs`` (:mod:`~later_django.admin.pages`); the moves are
:mod:`later_django.engine.job_actions.one_job`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_POST

from later_django.admin.job_tree import tree_svg
from later_django.admin.jobs import read_job
from later_django.admin.pages import (
    confirmation_page,
    detail_url,
    is_confirmed,
    path_name,
    render_page,
    require_manage,
)
from later_django.core import stages
from later_django.engine.job_actions import one_job
from later_django.engine.job_actions import record_checks as outcomes
from later_django.exceptions import ActionRefused
from later_django.overview.target import resolve_target


def job_detail(request: HttpRequest, job_id: str) -> TemplateResponse:
    """One job: task, arguments, when it runs, its attempts (duration, worker, error),
    timeline, errors, its continuation tree (SVG), partition neighbours."""
    job_id = path_name("job id", job_id)
    using, namespace = resolve_target(None, None)
    detail = read_job(using, namespace, job_id)
    if detail is None:
        raise Http404(f"job {job_id} does not exist (deleted, or its record expired)")
    tree = None
    if detail.tree is not None:
        # tree_svg escapes every text it writes.
        tree = mark_safe(tree_svg(detail.tree, detail_url))
    return render_page(
        request,
        "later_django/job_detail.html",
        f"Job {job_id}",
        job=detail,
        tree_svg=tree,
        live_stages=stages.LIVE_STAGES,
    )


def _action(
    run: Callable[[str, str, str], Any], done: str, after: Callable[[str], str]
) -> Callable[[HttpRequest, str], HttpResponse]:
    """A POST-only view running ``run(using, namespace, job_id)`` for users with the
    manage permission; it redirects to ``after(job_id)`` with a message."""

    @require_POST
    def view(request: HttpRequest, job_id: str) -> HttpResponse:
        require_manage(request)
        job_id = path_name("job id", job_id)
        using, namespace = resolve_target(None, None)
        try:
            run(using, namespace, job_id)
        except ActionRefused as refused:
            messages.error(request, str(refused))
            return HttpResponseRedirect(reverse("later_django:job_detail", args=[job_id]))
        messages.success(request, done.format(job_id=job_id))
        return HttpResponseRedirect(after(job_id))

    return view


#: What the Cancel button says it did, by what :func:`job_one_job.cancel_job` returned.
_CANCELLED_MESSAGES = {
    outcomes.CANCELLED: "Job {job_id} was cancelled; it will not run.",
    outcomes.REQUESTED: "Job {job_id} was asked to stop; it is recorded cancelled when it ends.",
    outcomes.FINISHED: "Job {job_id} had already finished; nothing changed.",
    outcomes.MISSING: "Job {job_id} does not exist any more; nothing changed.",
    outcomes.UNREADABLE: "Job {job_id} has a record that cannot be decoded; nothing changed.",
}


@require_http_methods(["GET", "POST"])
def cancel_job(request: HttpRequest, job_id: str) -> HttpResponse:
    """GET: a confirmation page naming the job and what a cancel will do; POST (CSRF):
    the cancel. Both need the manage permission."""
    require_manage(request)
    job_id = path_name("job id", job_id)
    using, namespace = resolve_target(None, None)
    if request.method == "POST":
        try:
            done = one_job.cancel_job(using, namespace, job_id)
        except ActionRefused as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, _CANCELLED_MESSAGES[done].format(job_id=job_id))
        return HttpResponseRedirect(detail_url(job_id))
    detail = read_job(using, namespace, job_id)
    if detail is None:
        raise Http404(f"job {job_id} does not exist (deleted, or its record expired)")
    return render_page(request, "later_django/job_cancel.html", f"Cancel job {job_id}", job=detail)


retry_job = _action(one_job.retry_failed, "Job {job_id} was enqueued again.", detail_url)
run_job_now = _action(one_job.run_now, "Job {job_id} was enqueued to run now.", detail_url)


@require_http_methods(["GET", "POST"])
def delete_job(request: HttpRequest, job_id: str) -> HttpResponse:
    """GET: a confirmation page naming the job and what a delete removes; POST (CSRF)
    with ``confirm=yes``: the delete. A POST without it deletes nothing and shows the
    confirmation page again (400), so an old one-click form or a forged POST does
    not delete. Both need the manage permission."""
    require_manage(request)
    job_id = path_name("job id", job_id)
    using, namespace = resolve_target(None, None)
    if is_confirmed(request):
        try:
            one_job.delete_job(using, namespace, job_id)
        except ActionRefused as refused:
            messages.error(request, str(refused))
            return HttpResponseRedirect(detail_url(job_id))
        messages.success(request, f"Job {job_id} was deleted.")
        return HttpResponseRedirect(reverse("later_django:dashboard"))
    detail = read_job(using, namespace, job_id)
    if detail is None:
        raise Http404(f"job {job_id} does not exist (deleted, or its record expired)")
    return confirmation_page(
        request,
        "later_django/job_delete.html",
        f"Delete job {job_id}",
        job=detail,
        live_stages=stages.LIVE_STAGES,
    )
