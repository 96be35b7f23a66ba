"""Wagtail's admin owns /admin/; the Django admin and later_django's dashboard live under
/django-admin/ (the dashboard's URLs before the admin's own)."""

from django.contrib import admin
from django.urls import include, path
from wagtail import urls as wagtail_urls
from wagtail.admin import urls as wagtailadmin_urls

urlpatterns = [
    path("django-admin/later_django/", include("later_django.admin.urls")),
    path("django-admin/", admin.site.urls),
    path("admin/", include(wagtailadmin_urls)),
    path("", include(wagtail_urls)),
]
