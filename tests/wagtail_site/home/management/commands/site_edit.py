"""Edits the site as an editor would, through Wagtail's page API, while no worker runs:
publishes ``--articles`` articles (each linking to the one before), publishes the first
``--republish`` of them ``--times`` more times, then deletes the last one (its jobs are
still waiting). Prints one JSON object: the articles' ids, the deleted one's id, how
many enqueues Wagtail made (calls of the backend's ``enqueue``, counted by wrapping it
in this process) and how many distinct jobs they returned (a unique policy folds a
duplicate into the pending job), and :func:`site_report.report` as it stands then
(``waiting``)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from wagtail.models import Page

from later_django.compat.tasks import task_backends
from tests.wagtail_site.home.management.commands.site_report import report
from tests.wagtail_site.home.models import ArticlePage


class Command(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--articles", type=int, default=5)
        parser.add_argument("--republish", type=int, default=2)
        parser.add_argument("--times", type=int, default=4)

    def handle(self, *args: Any, **options: Any) -> None:
        enqueued: list[str] = []
        backend = task_backends["default"]
        enqueue = backend.enqueue

        def counted(task: Any, args: Any, kwargs: Any) -> Any:
            result = enqueue(task, args, kwargs)
            enqueued.append(result.id)
            return result

        backend.enqueue = counted
        home = Page.objects.get(depth=2)
        articles: list[ArticlePage] = []
        for number in range(options["articles"]):
            article = ArticlePage(
                title=f"Article {number}",
                body=f"zephyrword{number} about quasars",
                related=articles[-1] if articles else None,
            )
            home.add_child(instance=article)
            article.save_revision().publish()
            articles.append(article)
        for article in articles[: options["republish"]]:
            for time in range(options["times"]):
                article.body = f"{article.body} (edit {time})"
                article.save_revision().publish()
        deleted = articles.pop()
        deleted_id = deleted.pk
        deleted.delete()
        edited = {
            "articles": [article.pk for article in articles],
            "deleted": deleted_id,
            "enqueues": len(enqueued),
            "jobs": len(set(enqueued)),
            "waiting": report(),
        }
        self.stdout.write(json.dumps(edited))
