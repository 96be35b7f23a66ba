"""``manage.py demo_seed``: jobs in several stages, for the dashboard and its tests.

Enqueues jobs that succeed and jobs that fail (no retries) and runs them with a
burst worker in this process; then enqueues jobs that stay ``enqueued``, jobs
deferred by an hour (``delayed``) and order jobs on the partitioned topic
"orders" (``enqueued`` too; the dashboard's partitions panel shows them). It
also writes an hour of queue-length readings (``later_queue_samples``, one per
minute, made up: a ramp up and down) so the queue-length chart has a line
before any maintenance pass has sampled.
Needs no running worker; run it against a fresh or existing demo database.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone

from demo import tasks
from demo.actions import ORDERS_TOPIC, orders
from demo.models import DemoJob
from later_django.api import enqueue_many, enqueue_to_partition
from later_django.conf import later_settings
from later_django.core.clock import now_ms
from later_django.storage.stores import stores_for

MINUTE_MS = 60_000
HISTORY_MINUTES = 60


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"expected a count >= 0, got {text!r}")
    return value


class Command(BaseCommand):
    help = "Seeds jobs that succeeded, failed, are enqueued and are delayed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--succeeded", type=_non_negative, default=30)
        parser.add_argument("--failed", type=_non_negative, default=5)
        parser.add_argument("--enqueued", type=_non_negative, default=40)
        parser.add_argument("--delayed", type=_non_negative, default=15)
        parser.add_argument("--orders", type=_non_negative, default=12)
        parser.add_argument(
            "--no-history", action="store_true", help="write no queue-length readings"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._enqueue("seed: succeeds", tasks.greet, options["succeeded"])
        self._enqueue("seed: fails", tasks.always_fails, options["failed"])
        if options["succeeded"] or options["failed"]:
            call_command("later_worker", "--burst", "--concurrency", "4", verbosity=0)
        self._enqueue("seed: enqueued", tasks.greet, options["enqueued"])
        later = timezone.now() + timedelta(hours=1)
        self._enqueue("seed: delayed", tasks.greet.using(run_after=later), options["delayed"])
        self._enqueue_orders(options["orders"])
        if not options["no_history"]:
            self._write_history()
        self.stdout.write(
            "Seeded: {succeeded} succeeded, {failed} failed, {enqueued} enqueued, "
            "{delayed} delayed, {orders} partitioned orders".format(**options)
            + ("" if options["no_history"] else f", {HISTORY_MINUTES} queue readings")
        )

    def _enqueue(self, label: str, task: Any, count: int) -> None:
        if not count:
            return
        database = later_settings().database
        with transaction.atomic(using=database):
            results = enqueue_many(task, [((label,), {}) for _ in range(count)])
            DemoJob.objects.using(database).bulk_create(
                [DemoJob(job_id=result.id, label=label) for result in results]
            )

    def _enqueue_orders(self, count: int) -> None:
        database = later_settings().database
        with transaction.atomic(using=database):
            results = [
                enqueue_to_partition(ORDERS_TOPIC, customer, tasks.process_order, number, customer)
                for number, customer in orders(count)
            ]
            DemoJob.objects.using(database).bulk_create(
                [DemoJob(job_id=result.id, label="seed: order") for result in results]
            )

    def _write_history(self) -> None:
        settings = later_settings()
        storage = stores_for(settings.database)
        now = now_ms()
        for minutes_ago in range(HISTORY_MINUTES, 0, -1):
            wave = math.sin(math.pi * (HISTORY_MINUTES - minutes_ago) / HISTORY_MINUTES)
            storage.metrics.record_queue_sample(
                settings.namespace,
                now - minutes_ago * MINUTE_MS,
                queued=round(400 * wave),
                partitioned=round(60 * wave),
            )
