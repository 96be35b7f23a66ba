"""The system check of :mod:`later_django.contrib.wagtail`: what it needs to show."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core import checks

from later_django.contrib.wagtail.access import dashboard_url


def check_setup(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``later_django.E020`` when ``later_django`` is not installed (no tables, no
    figures); ``later_django.W004`` when the dashboard's URLs are not included (the menu
    item and the panel's links would have nowhere to go, so they are left out)."""
    if not apps.is_installed("later_django"):
        return [
            checks.Error(
                "later_django.contrib.wagtail is installed but 'later_django' is not in "
                "INSTALLED_APPS: add it (before the contrib app), then migrate.",
                id="later_django.E020",
            )
        ]
    if dashboard_url() is None:
        return [
            checks.Warning(
                "later_django.contrib.wagtail shows no menu item: the URLs do not include "
                "later_django.admin.urls, so the dashboard has no address.",
                hint='Add path("django-admin/later_django/", include("later_django.admin.urls")) '
                "before the Django admin's own URLs (see docs/integrations/wagtail.md).",
                id="later_django.W004",
            )
        ]
    return []
