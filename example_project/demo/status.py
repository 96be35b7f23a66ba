"""What the demo page reads: live stage counts, the state of recent jobs, recurring jobs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from demo.models import DemoJob
from later_django.compat.tasks import TaskResultDoesNotExist, default_task_backend
from later_django.conf import later_settings
from later_django.engine.recurring import list_recurring
from later_django.storage.stores import stores_for

#: Stages in the order a job meets them.
STAGES = ("delayed", "waiting", "enqueued", "running", "requeued", "success", "failed")
#: How many of the newest jobs of each kind the page shows (a burst would fill it).
PER_KIND = 5


@dataclass(frozen=True)
class JobLine:
    """One row of the page's table of recent jobs."""

    job_id: str
    label: str
    status: str
    attempts: int
    outcome: str


def stage_counts() -> list[tuple[str, int]]:
    """``(stage, count)`` for every stage, zero included, from O(1) counters."""
    settings = later_settings()
    counts = stores_for(settings.database).index.job_index_stage_counts(settings.namespace)
    return [(stage, counts.get(stage, 0)) for stage in STAGES]


def recent_jobs(per_kind: int = PER_KIND) -> list[JobLine]:
    """The ``per_kind`` newest jobs of each kind the page enqueued, newest first, with
    their current status (read from the job records)."""
    jobs = DemoJob.objects.using(later_settings().database)
    labels = jobs.order_by().values_list("label", flat=True).distinct()
    newest = [job for label in labels for job in jobs.filter(label=label)[:per_kind]]
    newest.sort(key=lambda job: (job.created_at, job.pk), reverse=True)
    return [_line(job) for job in newest]


def _line(job: DemoJob) -> JobLine:
    try:
        result = default_task_backend.get_result(job.job_id)
    except TaskResultDoesNotExist:
        return JobLine(job.job_id, job.label, "EXPIRED", 0, "retention has passed")
    if result.errors and result.status.name != "SUCCESSFUL":
        outcome = result.errors[-1].exception_class_path
    elif result.errors:
        outcome = f"{result.return_value!r} after {len(result.errors)} failed attempt(s)"
    elif result.status.name == "SUCCESSFUL":
        outcome = repr(result.return_value)
    else:
        outcome = ""
    return JobLine(job.job_id, job.label, result.status.name, result.attempts, outcome)


@dataclass(frozen=True)
class RecurringLine:
    """One recurring job as the page shows it (times in UTC)."""

    id: str
    cron: str
    task: str
    next_run: str
    last_run: str
    sequential: bool


def recurring_jobs() -> list[RecurringLine]:
    """The namespace's recurring jobs (``LATER["RECURRING"]`` once a worker synced it)."""
    settings = later_settings()
    return [
        RecurringLine(
            id=definition.id,
            cron=definition.cron,
            task=definition.task_path,
            next_run=_when(definition.next_run_ms),
            last_run=_when(definition.last_run_ms),
            sequential=definition.sequential,
        )
        for definition in list_recurring(
            stores=stores_for(settings.database), namespace=settings.namespace
        )
    ]


def _when(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "never"
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
