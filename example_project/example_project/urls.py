"""URLs of the example project: the demo page at ``/``, the dashboard and admin at
``/admin/`` (later_django's pages before ``admin.site.urls``, see docs/dashboard.md),
the Prometheus metrics at ``/later/metrics`` (staff, or the bearer token of
``LATER_METRICS_TOKEN``; docs/observability.md)."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/later_django/", include("later_django.admin.urls")),
    path("admin_tools/", include("admin_tools.urls")),
    path("admin/", admin.site.urls),
    path("later/metrics", include("later_django.metrics.urls")),
    path("", include("demo.urls")),
]
