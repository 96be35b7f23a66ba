"""Jobs in several stages, made with the real engine, for the dashboard tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from later_django.api import continue_with
from later_django.engine import metrics
from tests.engine import tasks
from tests.engine.support import run_burst

SCRIPT = "<script>alert('x')</script>"


@dataclass
class Seeded:
    succeeded: list[str]
    failed: str
    queued: list[str]
    script_job: str
    delayed: str
    waiting_child: str


def seed_jobs() -> Seeded:
    """3 successes, 1 failure (run by an in-process burst worker), then 2 queued jobs,
    one queued job whose argument is a ``<script>`` tag, 1 delayed job (an hour
    ahead) and 1 continuation waiting for it."""
    succeeded = [tasks.add.enqueue(n, 1).id for n in range(3)]
    failed = tasks.fail_once_without_retry.enqueue("it broke").id
    run_burst()
    metrics.flush()
    queued = [tasks.add.enqueue(10, n).id for n in range(2)]
    script_job = tasks.record.enqueue(SCRIPT, "label").id
    delayed = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(7, 7).id
    waiting_child = continue_with(delayed, tasks.add, 1, 2).id
    return Seeded(succeeded, failed, queued, script_job, delayed, waiting_child)
