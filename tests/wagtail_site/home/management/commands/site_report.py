"""Prints one JSON object: what later_django holds about the site's jobs (the summary's
stage counts, and every finished job's task, stage, attempts and reason), and what
Wagtail's indexes hold (the articles the search finds by their body's word, and the
reference index's page-to-page links); with ``--admin``, also what Wagtail's admin home
page shows four users (:func:`site_admin_view.admin_views`)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from wagtail.models import ReferenceIndex

from later_django.engine.record_reads import read_records
from later_django.models import JobIndexEntry
from later_django.overview.summary import read_summary
from later_django.storage.stores import stores_for
from tests.wagtail_site.home.management.commands.site_admin_view import admin_views
from tests.wagtail_site.home.models import ArticlePage


def report() -> dict[str, Any]:
    """The report (the module's docstring) as a JSON-ready dict."""
    summary = read_summary()
    job_ids = list(JobIndexEntry.objects.values_list("job_id", flat=True))
    records = read_records(stores_for("default").kv, "default", job_ids)
    jobs = [
        {
            "task": record.task_path,
            "args": record.args,
            "queue": record.queue_name,
            "stage": record.stage,
            "attempts": len(record.worker_ids),
            "errors": [error.exception_class_path for error in record.errors],
            "reason": record.reason,
        }
        for record in records.values()
    ]
    found = {
        # "Article <n>" has the word "zephyrword<n>" in its body.
        article.pk: [hit.pk for hit in ArticlePage.objects.search(f"zephyrword{article.title[8:]}")]
        for article in ArticlePage.objects.order_by("pk")
    }
    references = sorted(
        (int(row.object_id), int(row.to_object_id)) for row in ReferenceIndex.objects.all()
    )
    return {
        "stages": {figure.stage: figure.count for figure in summary.stages},
        "failed_last_hour": summary.failed_last_hour,
        "jobs": jobs,
        "found": {str(pk): hits for pk, hits in found.items()},
        "references": references,
    }


class Command(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--admin", action="store_true", help="add the admin's views")

    def handle(self, *args: Any, **options: Any) -> None:
        shown = report()
        if options["admin"]:
            shown["admin"] = admin_views()
        self.stdout.write(json.dumps(shown))
