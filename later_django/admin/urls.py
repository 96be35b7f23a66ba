"""URLs of the dashboard pages; include them *before* ``admin.site.urls``::

    path("admin/later_django/", include("later_django.admin.urls")),
    path("admin/", admin.site.urls),

Every view is wrapped by ``admin.site.admin_view`` (staff only, CSRF, no cache).
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from later_django.admin import views

app_name = "later_django"

urlpatterns = [
    path("", admin.site.admin_view(views.dashboard), name="dashboard"),
    path("jobs/<str:stage>/", admin.site.admin_view(views.job_list), name="job_list"),
    path("job/<str:job_id>/", admin.site.admin_view(views.job_detail), name="job_detail"),
    path("job/<str:job_id>/retry/", admin.site.admin_view(views.retry_job), name="job_retry"),
    path("job/<str:job_id>/run-now/", admin.site.admin_view(views.run_job_now), name="job_run_now"),
    path("job/<str:job_id>/delete/", admin.site.admin_view(views.delete_job), name="job_delete"),
    path(
        "partitions/<str:topic>/<int:partition_id>/",
        admin.site.admin_view(views.partition_list),
        name="partition_list",
    ),
]
