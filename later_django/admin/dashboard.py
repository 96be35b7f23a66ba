"""later_django's panels as a django-admin-tools index dashboard.

Set ``ADMIN_TOOLS_INDEX_DASHBOARD = "later_django.admin.dashboard.LaterIndexDashboard"``.
Each panel is a :class:`LaterPanel` module rendering the same template as the
plain page (``later_django/panels/*.html``, with the same context); the figures are read once per
request (:func:`later_django.admin.panels.dashboard_context`). The first panel (Stages)
opens with a row of links to the operator pages
(:data:`~later_django.admin.pages.PAGES`), so each of them is one click from the admin
index, where the admin login lands. The panels need
no JavaScript; admin-tools' own script only adds dragging and collapsing.

Importing this module needs ``admin_tools`` (and, on Django 6.x, the
``django.utils.itercompat`` shim that ``later_django.apps`` installs).
"""

from __future__ import annotations

from typing import Any

from admin_tools.dashboard import Dashboard, modules
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse

from later_django.admin.pages import page_links
from later_django.admin.panels import dashboard_context

#: (module id, title, panel template) in the order the dashboard shows them.
PANELS: tuple[tuple[str, str, str], ...] = (
    ("stages", "Stages", "later_django/panels/stages.html"),
    ("throughput", "Throughput", "later_django/panels/throughput.html"),
    ("db-size", "Database size", "later_django/panels/db_size.html"),
    ("history", "Queue length history", "later_django/panels/history.html"),
    ("throughput-chart", "Jobs finished", "later_django/panels/throughput_chart.html"),
    ("workers", "Workers", "later_django/panels/workers.html"),
    ("partitions", "Partitions", "later_django/panels/partitions.html"),
    ("recurring", "Recurring jobs", "later_django/panels/recurring.html"),
)


class LaterPanel(modules.DashboardModule):
    """One later_django panel as an admin-tools module."""

    template = "later_django/admin_tools_module.html"

    def __init__(
        self,
        title: str,
        panel_template: str,
        *,
        page_links: list[tuple[str, str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(title=title, **kwargs)
        self.panel_template = panel_template
        #: (label, URL) of the links row above the panel (none: no row).
        self.page_links = page_links or []

    def init_with_context(self, context: Any) -> None:
        if getattr(self, "_initialized", False):
            return
        request = context["request"]
        self.later = dashboard_context(request)
        self.panel_html = render_to_string(self.panel_template, self.later, request=request)
        self._initialized = True

    def is_empty(self) -> bool:
        return False


class LaterIndexDashboard(Dashboard):
    """The admin index: later_django's panels (the first with links to the operator
    pages), and the usual application list and recent actions."""

    columns = 2
    title = "Later jobs"

    class Media:
        # admin-tools links these from its css.html; the panels' chart and
        # tiles are drawn by this sheet (without it the SVG fills black).
        css = {"all": ("later_django/dashboard.css",)}
        js = ()

    def init_with_context(self, context: Any) -> None:
        if self.children:
            return
        links = page_links()
        for module_id, title, template in PANELS:
            panel = LaterPanel(
                title,
                template,
                title_url=_dashboard_url(),
                page_links=links if module_id == PANELS[0][0] else None,
            )
            panel.id = f"later-{module_id}"
            self.children.append(panel)
        self.children.append(modules.AppList("Applications"))
        self.children.append(modules.RecentActions("Recent actions", limit=5))


def _dashboard_url() -> str:
    try:
        return reverse("later_django:dashboard")
    except NoReverseMatch:
        return ""
