"""The workers page: each live worker process and the jobs it runs now.

Three reads, each bounded by a small table or a limit, none by the number of jobs:

* the live workers: ``later_worker`` rows whose heartbeat is under
  :data:`~later_django.overview.queues.LIVE_WORKER_MS` old (one row per worker process);
* their execution leases (``later_job_execution``: one row per running job), the
  oldest start first, at most :data:`RUNNING_SHOWN` (+1 to know whether more run);
* the task paths: the records of those jobs, by key, in one statement
  (:func:`~later_django.engine.record_reads.read_records_and_errors`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.http import HttpRequest
from django.template.response import TemplateResponse

from later_django.admin.pages import render_page
from later_django.admin.units import human_age, when
from later_django.core import clock
from later_django.engine.record_reads import read_records_and_errors
from later_django.overview.queues import LIVE_WORKER_MS
from later_django.overview.target import resolve_target
from later_django.storage.execution import RunningExecution
from later_django.storage.stores import stores_for

#: Running jobs listed on the page at most (over every worker).
RUNNING_SHOWN = 200


@dataclass(frozen=True)
class RunningJobRow:
    """One job a worker runs now."""

    job_id: str
    #: ``None`` when the record is gone (the job just finished and expired, or was
    #: deleted) or cannot be decoded (see ``unreadable``).
    task_path: str | None
    unreadable: bool
    attempt: int
    started_at: datetime | None
    running_for: str
    #: The worker did not renew the lease in time (it may be stuck or gone).
    lease_lapsed: bool


@dataclass(frozen=True)
class WorkerLine:
    """One live worker process."""

    worker_id: str
    host: str
    pid: int
    started_at: datetime | None
    started_ago: str
    heartbeat_at: datetime | None
    heartbeat_age: str
    queues: str
    busy: int
    concurrency: int
    jobs: list[RunningJobRow] = field(default_factory=list)


@dataclass(frozen=True)
class WorkerPage:
    namespace: str
    using: str
    workers: list[WorkerLine]
    #: Running jobs listed, and whether more run than :data:`RUNNING_SHOWN`.
    jobs_shown: int
    more_running: bool
    limit: int = RUNNING_SHOWN


def worker_page(
    using: str | None = None,
    namespace: str | None = None,
    *,
    now_ms: int | None = None,
    limit: int = RUNNING_SHOWN,
) -> WorkerPage:
    """The live workers by worker id, each with its running jobs (oldest start first)."""
    using, namespace = resolve_target(using, namespace)
    now = clock.now_ms() if now_ms is None else now_ms
    stores = stores_for(using)
    workers = stores.executions.workers_live(namespace, now - LIVE_WORKER_MS)
    leases = stores.executions.leases_of_owners(
        namespace, [worker.worker_id for worker in workers], limit + 1
    )
    shown = leases[:limit]
    records, unreadable = read_records_and_errors(
        stores.kv, namespace, [lease.job_id for lease in shown]
    )
    jobs_of: dict[str, list[RunningJobRow]] = {}
    for lease in shown:
        record = records.get(lease.job_id)
        task_path = None if record is None else record.task_path
        row = _job_row(lease, task_path, lease.job_id in unreadable, now)
        jobs_of.setdefault(lease.owner, []).append(row)
    lines = []
    seen: set[str] = set()
    for worker in workers:
        if worker.worker_id in seen:  # one line per worker, whatever a read returned
            continue
        seen.add(worker.worker_id)
        lines.append(
            WorkerLine(
                worker_id=worker.worker_id,
                host=worker.host,
                pid=worker.pid,
                started_at=when(worker.started_at_ms),
                started_ago=human_age(now, worker.started_at_ms),
                heartbeat_at=when(worker.heartbeat_at_ms),
                heartbeat_age=human_age(now, worker.heartbeat_at_ms),
                queues=", ".join(dict.fromkeys(worker.queues)),
                busy=worker.busy,
                concurrency=worker.concurrency,
                jobs=jobs_of.get(worker.worker_id, []),
            )
        )
    return WorkerPage(namespace, using, lines, len(shown), len(leases) > limit, limit)


def _job_row(
    lease: RunningExecution, task_path: str | None, unreadable: bool, now_ms: int
) -> RunningJobRow:
    return RunningJobRow(
        job_id=lease.job_id,
        task_path=task_path,
        unreadable=unreadable,
        attempt=lease.attempt,
        started_at=when(lease.started_at_ms),
        running_for=human_age(now_ms, lease.started_at_ms),
        lease_lapsed=lease.lease_until_ms <= now_ms,
    )


def worker_list(request: HttpRequest) -> TemplateResponse:
    """Every live worker process and the jobs it runs now (task, attempt, running for).

    Bounded: the live ``later_worker`` rows (one per process), their execution leases
    (``later_job_execution``, one row per running job) at most
    :data:`~later_django.admin.workers.RUNNING_SHOWN` over all workers, and those jobs'
    records read by key in one statement (:mod:`later_django.admin.workers`)."""
    return render_page(
        request,
        "later_django/worker_list.html",
        "Workers",
        later_page="workers",
        workers=worker_page(),
    )
