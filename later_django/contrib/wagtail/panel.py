"""The panel on Wagtail's dashboard: jobs per stage and the failures of the last hour,
each linking to its list in later_django's dashboard."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.urls import NoReverseMatch, reverse
from wagtail.admin.ui.components import Component

from later_django.contrib.wagtail.access import dashboard_url, failures_url
from later_django.exceptions import TablesMissing
from later_django.overview.summary import read_summary
from later_django.overview.target import resolve_target
from later_django.storage.tables import naming_missing_tables


class JobsPanel(Component):
    """Reads :func:`~later_django.overview.summary.read_summary` once per render (a few
    bounded reads); says so instead of failing while later_django's tables are missing."""

    name = "later_jobs"
    template_name = "later_django/contrib/wagtail/panel.html"
    #: After Wagtail's moderation panels (210, 220), before recent edits (250).
    order = 240

    def get_context_data(self, parent_context: Mapping[str, Any] | None) -> Mapping[str, Any]:
        context: dict[str, Any] = {
            "dashboard_url": dashboard_url(),
            "failures_url": failures_url("1h"),
        }
        using, _ = resolve_target(None, None)
        try:
            with naming_missing_tables(using):
                summary = read_summary()
        except TablesMissing as error:
            return {**context, "problem": str(error)}
        context["stages"] = [
            {"stage": figure.stage, "count": figure.count, "url": _stage_url(figure.stage)}
            for figure in summary.stages
        ]
        context["failed_last_hour"] = summary.failed_last_hour
        return context


def _stage_url(stage: str) -> str | None:
    try:
        return reverse("later_django:job_list", args=[stage])
    except NoReverseMatch:
        return None
