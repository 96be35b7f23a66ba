"""Wagtail's hooks: the "Background jobs" menu item and the dashboard panel, both shown
only to users :func:`~later_django.contrib.wagtail.access.may_view_jobs` allows."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from wagtail import hooks
from wagtail.admin.menu import MenuItem

from later_django.contrib.wagtail.access import dashboard_url, may_view_jobs
from later_django.contrib.wagtail.panel import JobsPanel

#: After Wagtail's Reports (9000), before Settings (10000).
MENU_ORDER = 9500


class JobsMenuItem(MenuItem):
    """The menu item; hidden from users who may not view jobs."""

    def is_shown(self, request: HttpRequest) -> bool:
        return may_view_jobs(request.user)


@hooks.register("register_admin_menu_item")
def register_jobs_menu_item() -> MenuItem | None:
    """The "Background jobs" item, linking to the dashboard (none without its URLs:
    check ``later_django.W004``)."""
    url = dashboard_url()
    if url is None:
        return None
    return JobsMenuItem(
        "Background jobs", url, name="later-jobs", icon_name="tasks", order=MENU_ORDER
    )


@hooks.register("construct_homepage_panels")
def add_jobs_panel(request: HttpRequest, panels: list[Any]) -> None:
    """Adds :class:`~later_django.contrib.wagtail.panel.JobsPanel` for users who may
    view jobs."""
    if may_view_jobs(request.user):
        panels.append(JobsPanel())
