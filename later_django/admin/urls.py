"""URLs of the dashboard pages; include them *before* ``admin.site.urls``::

    path("admin/later_django/", include("later_django.admin.urls")),
    path("admin/", admin.site.urls),

Every view is wrapped by ``admin.site.admin_view`` (staff only, CSRF, no cache) and
answers 503 "run manage.py migrate" while later_django's tables are missing.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin
from django.http import HttpResponse
from django.urls import path

from later_django.admin import (
    job_list_views,
    job_views,
    pages,
    panels,
    queues,
    recurring,
    tasks,
    workers,
    workflow_views,
)

app_name = "later_django"


def _staff(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A staff page (``admin.site.admin_view``) that names missing migrations and answers
    a bad parameter with 400, an address naming nothing with 404 (both named)."""
    return admin.site.admin_view(pages.answering_missing_tables(pages.refusing_bad_input(view)))


urlpatterns = [
    path("", _staff(panels.dashboard), name="dashboard"),
    path("jobs/<str:stage>/", _staff(job_list_views.job_list), name="job_list"),
    path("jobs/<str:stage>/bulk/", _staff(job_list_views.job_bulk), name="job_bulk"),
    path("job/<str:job_id>/", _staff(job_views.job_detail), name="job_detail"),
    path("job/<str:job_id>/retry/", _staff(job_views.retry_job), name="job_retry"),
    path("job/<str:job_id>/run-now/", _staff(job_views.run_job_now), name="job_run_now"),
    path("job/<str:job_id>/delete/", _staff(job_views.delete_job), name="job_delete"),
    path("job/<str:job_id>/cancel/", _staff(job_views.cancel_job), name="job_cancel"),
    path("queues/", _staff(queues.queue_list), name="queue_list"),
    path("queues/pause/", _staff(queues.pause_queue_view), name="queue_pause"),
    path("queues/resume/", _staff(queues.resume_queue_view), name="queue_resume"),
    path("workers/", _staff(workers.worker_list), name="worker_list"),
    path("recurring/", _staff(recurring.recurring_list), name="recurring_list"),
    path("recurring/disable/", _staff(recurring.recurring_disable), name="recurring_disable"),
    path("recurring/enable/", _staff(recurring.recurring_enable), name="recurring_enable"),
    path("recurring/run-now/", _staff(recurring.recurring_run_now), name="recurring_run_now"),
    path(
        "partitions/<str:topic>/<int:partition_id>/",
        _staff(job_list_views.partition_list),
        name="partition_list",
    ),
    path("tasks/", _staff(tasks.task_list), name="task_list"),
    path("tasks/<path:task_path>/", _staff(tasks.task_detail), name="task_detail"),
    path("failures/", _staff(tasks.failure_list), name="failure_list"),
    path("workflows/", _staff(workflow_views.workflow_list), name="workflow_list"),
    path(
        "workflows/<str:workflow_id>/",
        _staff(workflow_views.workflow_detail),
        name="workflow_detail",
    ),
    path(
        "workflows/<str:workflow_id>/<str:action>/",
        _staff(workflow_views.workflow_action),
        name="workflow_action",
    ),
    path(
        "workflows/<str:workflow_id>/<str:action>/confirm/",
        _staff(workflow_views.workflow_confirm),
        name="workflow_confirm",
    ),
]
