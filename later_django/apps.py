"""The app configuration: registers later_django's system checks and installs the
admin-tools compatibility shim (:mod:`later_django.compat`)."""

from django.apps import AppConfig

from later_django.compat import install_itercompat

# At import, not in ready(): Django imports each app's ``apps`` module in
# INSTALLED_APPS order, so admin_tools (listed after later_django) finds the
# ``django.utils.itercompat`` it imports (removed in Django 6.0).
install_itercompat()


class LaterConfig(AppConfig):
    name = "later_django"
    label = "later_django"
    verbose_name = "Later jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from later_django import checks  # noqa: F401  (registers the checks)
