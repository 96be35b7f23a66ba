"""The app of :mod:`later_django.contrib.wagtail`; its hooks are in ``wagtail_hooks``
(Wagtail imports that module of every installed app)."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks


class LaterWagtailConfig(AppConfig):
    name = "later_django.contrib.wagtail"
    label = "later_wagtail"
    verbose_name = "later_django in Wagtail's admin"

    def ready(self) -> None:
        from later_django.contrib.wagtail.checks import check_setup

        checks.register(check_setup)
