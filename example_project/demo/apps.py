"""The demo app of the example project: a page of buttons that enqueue jobs."""

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "demo"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "later_django demo"
