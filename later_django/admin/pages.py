"""What every dashboard page shares: the admin's context, the permission and the
confirmation rule of the actions, and the answer while the tables are missing.

Every view runs through ``admin.site.admin_view``: only active staff users
see them (others are sent to the admin login), responses are never cached,
and POSTs are CSRF-checked. The actions are POST only and additionally need
the permission ``later_django.manage_jobs`` (:func:`require_manage`); without it
they answer 403. The destructive ones (cancel, delete, and every bulk action)
first show a confirmation page (GET, the same permission), and the delete's and
the bulk actions' POST must carry ``confirm=yes`` (:func:`confirmation_page`).

The pages' views live next to their pages: :mod:`~later_django.admin.panels` (the
dashboard), :mod:`~later_django.admin.job_list_views` (job lists, search, bulk
actions, a partition's jobs), :mod:`~later_django.admin.job_views` (one job and its
buttons), :mod:`~later_django.admin.queues`, :mod:`~later_django.admin.workers`,
:mod:`~later_django.admin.recurring` and :mod:`~later_django.admin.tasks`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, QueryDict
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse

from later_django import inputs
from later_django.exceptions import TablesMissing
from later_django.overview.figures import STAGES
from later_django.overview.target import resolve_target
from later_django.storage.tables import naming_missing_tables

MANAGE_PERMISSION = "later_django.manage_jobs"
#: The field (and value) a delete's POST must carry: the confirmation page's button.
CONFIRM_FIELD, CONFIRM_VALUE = "confirm", "yes"
#: The answer to a delete POST without the confirmation (the page is shown again).
UNCONFIRMED_STATUS = 400
#: The answer of every page while later_django's tables are missing.
TABLES_MISSING_STATUS = 503
#: The answer to a parameter or form field that breaks its rule (the page names it).
BAD_INPUT_STATUS = 400
#: The answer to an address naming what cannot exist (the page names it and the rule).
UNKNOWN_STATUS = 404
REFUSED_TEMPLATE = "later_django/refused.html"
#: The operator pages, in the order they are linked: (key, label, URL name). The one
#: list: every page's nav (``base.html``, the current page by its ``later_page`` key)
#: and the admin index's links row (:mod:`~later_django.admin.dashboard`) read it.
PAGES: tuple[tuple[str, str, str], ...] = (
    ("dashboard", "Dashboard", "later_django:dashboard"),
    ("failures", "Failures", "later_django:failure_list"),
    ("queues", "Queues", "later_django:queue_list"),
    ("workers", "Workers", "later_django:worker_list"),
    ("tasks", "Tasks", "later_django:task_list"),
    ("recurring", "Recurring", "later_django:recurring_list"),
    ("workflows", "Workflows", "later_django:workflow_list"),
)


def page_links() -> list[tuple[str, str, str]]:
    """(key, label, URL) of :data:`PAGES`; none when the project's URLs do not include
    ``later_django.admin.urls`` (the admin index's panels still show)."""
    try:
        return [(key, label, reverse(name)) for key, label, name in PAGES]
    except NoReverseMatch:
        return []


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


class Unknown(Exception):
    """What an address names does not exist (or cannot: a path segment that breaks its
    rule); answered 404 by :func:`refusing_bad_input` with the message on the page."""


def refusing_bad_input(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view``, answering an :class:`~later_django.inputs.InputError` it raises with a
    400 page and an :class:`Unknown` with a 404 page, each naming the field, the value
    (cut) and the rule. Views parse every outside value before acting, so such an
    answer means nothing was done."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except inputs.InputError as error:
            return _refused(request, "Bad input", str(error), BAD_INPUT_STATUS)
        except Unknown as error:
            return _refused(request, "Not found", str(error), UNKNOWN_STATUS)

    return wrapped


def _refused(request: HttpRequest, title: str, refusal: str, status: int) -> HttpResponse:
    response = render_page(request, REFUSED_TEMPLATE, title, refusal_title=title, refusal=refusal)
    response.status_code = status
    return response


def query_value(query: QueryDict, field: str) -> str:
    """The one value of ``field`` (``""`` when absent); ``InputError`` when it is given
    more than once (the last one silently winning would act on what was not meant)."""
    return inputs.one(field, query.getlist(field)) or ""


def path_value(parse: Callable[[str, str], Any], field: str, value: str) -> Any:
    """``parse(field, value)`` of a URL path segment; a value that breaks the rule names
    nothing that can exist, so it is :class:`Unknown` (404), not a 400."""
    try:
        return parse(field, value)
    except inputs.InputError as error:
        raise Unknown(str(error)) from None


def path_name(field: str, value: str) -> str:
    """A job id, topic or task path from the URL: no NUL, at most
    :data:`~later_django.inputs.NAME_LENGTH` characters (:class:`Unknown` otherwise)."""
    return str(
        path_value(lambda f, v: inputs.text(f, v, max_length=inputs.NAME_LENGTH), field, value)
    )


def is_confirmed(request: HttpRequest) -> bool:
    """Whether a POST carries the confirmation: ``confirm`` given once, ``yes``."""
    return request.method == "POST" and inputs.confirmed(request.POST.getlist(CONFIRM_FIELD))


def render_page(request: HttpRequest, template: str, title: str, **extra: Any) -> TemplateResponse:
    """A dashboard page: the admin's context, the stages, whether the user may manage
    jobs, and ``extra``."""
    context = {
        **admin.site.each_context(request),
        "title": title,
        "stages": STAGES,
        "can_manage": request.user.has_perm(MANAGE_PERMISSION),
        "later_pages": page_links(),
        **extra,
    }
    return TemplateResponse(request, template, context)


def confirmation_page(
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


def require_manage(request: HttpRequest) -> None:
    """PermissionDenied (403) unless the user may change jobs and queues."""
    if not request.user.has_perm(MANAGE_PERMISSION):
        raise PermissionDenied(f"changing jobs needs the permission {MANAGE_PERMISSION}")


def detail_url(job_id: str) -> str:
    """The URL of the page of job ``job_id``."""
    return reverse("later_django:job_detail", args=[job_id])
