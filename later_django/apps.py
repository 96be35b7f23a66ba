"""The app configuration: registers later_django's system checks."""

from django.apps import AppConfig


class LaterConfig(AppConfig):
    name = "later_django"
    label = "later_django"
    verbose_name = "Later jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from later_django import checks  # noqa: F401  (registers the checks)
