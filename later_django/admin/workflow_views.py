"""The Workflows pages: the list (newest first, a state filter, cursor pages), one
workflow's page (its DAG, counts, callbacks, what its waiting jobs wait on) and its
buttons, Cancel and Retry.

Each button is a link to a confirmation page (GET) whose form POSTs ``confirm=yes``
to the action; the action is POST only (405 otherwise), CSRF-checked, needs
``later_django.manage_jobs`` (403) and, without ``confirm=yes``, changes nothing and
shows the confirmation page again (400) (:func:`~later_django.admin.pages.confirmation_page`).
The moves are the engine's: ``engine.workflows.cancel`` and
``engine.workflow_retry.retry``. An id that is not a ULID, or names no workflow: 404.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from later_django import inputs
from later_django.admin import workflow_detail as detail_reads
from later_django.admin import workflow_lists
from later_django.admin.pages import (
    CONFIRM_FIELD,
    confirmation_page,
    detail_url,
    render_page,
    require_manage,
)
from later_django.admin.workflow_detail import WorkflowDetail, read_detail
from later_django.admin.workflow_graph import MOST_EDGES, graph_svg
from later_django.admin.workflow_lists import STATES, check_state, workflow_page
from later_django.admin.workflow_rows import left_out_rows, waiting_items
from later_django.engine import workflow_retry, workflows
from later_django.engine.job_actions.record_checks import CANCELLED, REQUESTED
from later_django.exceptions import ActionRefused
from later_django.overview.target import resolve_target
from later_django.storage.stores import stores_for

#: The answer of a list whose state or cursor is not valid (the page names it).
BAD_INPUT_STATUS = 400
LIST_TEMPLATE = "later_django/workflow_list.html"
#: The buttons: action -> (label, what the confirmation page says it does).
ACTIONS = {
    "cancel": (
        "Cancel",
        "Every job of the workflow that has not finished is cancelled, the last to join "
        "first; a running job is asked to stop and recorded cancelled when it ends. "
        "Finished jobs are left alone. A cancelled batch fires none of its callbacks.",
    ),
    "retry": (
        "Retry",
        "The failed and cancelled jobs run again, and every job downstream of them "
        "(whatever its stage); what succeeded upstream is kept. Refused while a job of "
        "the workflow is still live: cancel it first, or wait.",
    ),
}


def workflow_url(workflow_id: str) -> str:
    """The URL of the page of workflow ``workflow_id``."""
    return reverse("later_django:workflow_detail", args=[workflow_id])


def workflow_list(request: HttpRequest) -> TemplateResponse:
    """Workflows and batches, newest first, a cursor page at a time (``?cursor=``, the
    last id of the previous page), optionally one ``?state=``; a state or cursor that
    is not valid is named on the page (400)."""
    state = request.GET.get("state") or None
    cursor = request.GET.get("cursor") or None
    context = {"later_page": "workflows", "states": STATES, "state": state, "cursor": cursor}
    try:
        if state is not None:
            check_state(state)
        if cursor is not None:
            inputs.job_id("cursor", cursor)
    except ValueError as error:
        response = render_page(
            request, LIST_TEMPLATE, "Workflows", input_error=str(error), **context
        )
        response.status_code = BAD_INPUT_STATUS
        return response
    using, namespace = resolve_target(None, None)
    page = workflow_page(using, namespace, state, cursor)
    return render_page(
        request,
        LIST_TEMPLATE,
        "Workflows",
        page=page,
        walk_cap=f"{workflow_lists.WALK_CAP:,}",
        **context,
    )


def _checked_id(workflow_id: str) -> None:
    """404 for an id that is not a ULID (no workflow can have it)."""
    try:
        inputs.job_id("workflow id", workflow_id)
    except inputs.InputError as error:
        raise Http404(str(error)) from None


def _detail(workflow_id: str) -> WorkflowDetail:
    """The workflow's page reads; 404 for an id that is not a ULID or no workflow's."""
    _checked_id(workflow_id)
    using, namespace = resolve_target(None, None)
    detail = read_detail(using, namespace, workflow_id)
    if detail is None:
        raise Http404(f"workflow {workflow_id} does not exist")
    return detail


def job_href() -> Callable[[str], str]:
    """``detail_url``, reversed once: a page of 1,000 jobs would spend most of its
    time in ``reverse`` (a job id is a ULID, which a URL holds as it is)."""
    marker = "00000000000000000000000000"
    url = detail_url(marker)
    head, tail = url[: url.index(marker)], url[url.index(marker) + len(marker) :]
    return lambda job_id: f"{head}{job_id}{tail}"


def workflow_detail(request: HttpRequest, workflow_id: str) -> TemplateResponse:
    """One workflow: kind, name, state, counts, created and duration, callbacks, the
    DAG of its first jobs, what its waiting jobs wait on, the jobs left out of the
    figure, and the Cancel and Retry buttons."""
    detail = _detail(workflow_id)
    href = job_href()
    drawing = graph_svg(detail.drawn, href, f"jobs of workflow {workflow_id}")
    return render_page(
        request,
        "later_django/workflow_detail.html",
        f"Workflow {workflow_id}",
        later_page="workflows",
        flow=detail,
        # graph_svg, waiting_items and left_out_rows escape every text they write.
        graph_svg=mark_safe(drawing.svg),
        waiting_items=mark_safe(waiting_items(detail.waiting, href)),
        left_out_rows=mark_safe(left_out_rows(detail.listed, href)),
        edges_left_out=drawing.edges_left_out,
        drawn_most=detail_reads.DRAWN,
        read_most=f"{detail_reads.READ:,}",
        most_edges=f"{MOST_EDGES:,}",
    )


def _action_of(action: str) -> tuple[str, str]:
    if action not in ACTIONS:
        raise Http404(f"no workflow action {action[:40]!r}")
    return ACTIONS[action]


def _confirmation(request: HttpRequest, workflow_id: str, action: str) -> HttpResponse:
    """The confirmation page of ``action`` on the workflow (400 for a POST without the
    confirmation: :func:`~later_django.admin.pages.confirmation_page`)."""
    label, effect = _action_of(action)
    return confirmation_page(
        request,
        "later_django/workflow_confirm.html",
        f"{label} workflow {workflow_id}",
        later_page="workflows",
        flow=_detail(workflow_id),
        action=action,
        label=label,
        effect=effect,
    )


@require_GET
def workflow_confirm(request: HttpRequest, workflow_id: str, action: str) -> HttpResponse:
    """The confirmation page of ``action`` (``cancel`` or ``retry``); needs the
    manage permission."""
    require_manage(request)
    return _confirmation(request, workflow_id, action)


@require_POST
def workflow_action(request: HttpRequest, workflow_id: str, action: str) -> HttpResponse:
    """``action`` on the workflow, when the POST carries ``confirm=yes``; without it,
    nothing changes and the confirmation page comes back (400). Back to the
    workflow's page with what was done."""
    require_manage(request)
    _action_of(action)  # an unknown action: 404
    if not inputs.confirmed(request.POST.getlist(CONFIRM_FIELD)):
        return _confirmation(request, workflow_id, action)
    using, namespace = resolve_target(None, None)
    # An unknown workflow is a 404 (one key read; the page's reads are not needed).
    _checked_id(workflow_id)
    if not workflows.exists(stores_for(using), namespace, workflow_id):
        raise Http404(f"workflow {workflow_id} does not exist")
    try:
        if action == "cancel":
            done = workflows.cancel(using, namespace, workflow_id)
            messages.success(request, _cancelled_text(workflow_id, done))
        else:
            again = workflow_retry.retry(using, namespace, workflow_id)
            messages.success(request, _retried_text(workflow_id, again))
    except ActionRefused as refused:
        messages.error(request, f"Nothing was done: {refused}")
    return HttpResponseRedirect(workflow_url(workflow_id))


def _cancelled_text(workflow_id: str, done: dict[str, str]) -> str:
    if not done:
        return f"Workflow {workflow_id} had no job left to cancel; nothing changed."
    outcomes = list(done.values())
    cancelled, requested = outcomes.count(CANCELLED), outcomes.count(REQUESTED)
    text = f"Workflow {workflow_id}: {cancelled} job(s) cancelled"
    if requested:
        text += f", {requested} running job(s) asked to stop (recorded cancelled when they end)"
    others = len(outcomes) - cancelled - requested
    if others:
        text += f", {others} left as they were (finished meanwhile, or gone)"
    return text + "."


def _retried_text(workflow_id: str, again: list[str]) -> str:
    if not again:
        return f"Workflow {workflow_id} had no failed or cancelled job; nothing changed."
    return f"Workflow {workflow_id}: {len(again)} job(s) will run again."
