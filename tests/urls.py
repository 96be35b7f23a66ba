from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/later_django/", include("later_django.admin.urls")),
    path("admin_tools/", include("admin_tools.urls")),
    path("admin/", admin.site.urls),
    path("later/metrics", include("later_django.metrics.urls")),
]
