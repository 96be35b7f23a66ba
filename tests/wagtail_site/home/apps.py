from django.apps import AppConfig


class HomeConfig(AppConfig):
    name = "tests.wagtail_site.home"
    label = "wagtail_site_home"
    default_auto_field = "django.db.models.BigAutoField"
