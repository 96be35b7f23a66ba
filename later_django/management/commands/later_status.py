"""``manage.py later_status``: jobs per stage, queues, workers, partitions, recurring jobs.

The figures are :func:`later_django.overview.snapshot.read_overview`'s, the same as the
dashboard's. ``--json`` prints them as one JSON object. ``--check`` makes the
command a readiness check (a container's ``HEALTHCHECK``, a Kubernetes readiness
probe): each failed threshold is named on stderr, and the exit status says which
failed first:

* 3 (:data:`EXIT_TOO_FEW_WORKERS`): fewer than ``--min-workers`` (1) workers sent a
  heartbeat within the last minute;
* 4 (:data:`EXIT_READY_TOO_OLD`): the oldest ready message of a queue that is not
  paused has waited longer than ``--max-oldest-ready-age`` seconds (300; ``--max-age``
  is its older name).

Liveness that needs no database is ``later_worker --health-file``.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from later_django import inputs
from later_django.conf import later_settings
from later_django.exceptions import TablesMissing
from later_django.management.common import (
    age_seconds,
    later_django_version,
    text_table,
    utc_time,
)
from later_django.management.options import (
    MAX_AGE_SECONDS,
    MAX_WORKERS,
    count_of,
    name_of,
    option_type,
    seconds_of,
)
from later_django.overview.figures import Overview, TopicFigure
from later_django.overview.queues import LIVE_WORKER_MS
from later_django.overview.snapshot import read_overview
from later_django.overview.target import namespace_in_use, resolve_target
from later_django.storage.tables import naming_missing_tables

DEFAULT_MAX_AGE_SECONDS = 300.0
#: ``--check``'s exit status per failed threshold (the first one that failed).
EXIT_TOO_FEW_WORKERS = 3
EXIT_READY_TOO_OLD = 4


def health_problems(
    overview: Overview, max_age_seconds: float, min_workers: int = 1
) -> list[tuple[int, str]]:
    """Why ``--check`` fails, as (exit status, message): too few live workers, or a
    ready job older than the threshold."""
    problems: list[tuple[int, str]] = []
    live = len(overview.workers)
    if live < min_workers:
        seen = f"none sent a heartbeat in the last {LIVE_WORKER_MS // 1000} s"
        if live:
            seen = f"{live} sent a heartbeat in the last {LIVE_WORKER_MS // 1000} s"
        what = "no live worker" if not live else f"fewer than {min_workers} live workers"
        problems.append(
            (EXIT_TOO_FEW_WORKERS, f"{what} in namespace {overview.namespace!r} ({seen})")
        )
    oldest = overview.oldest_ready_age_ms
    if oldest is not None and oldest > max_age_seconds * 1000:
        problems.append(
            (
                EXIT_READY_TOO_OLD,
                f"the oldest ready job has waited {oldest / 1000:.1f} s, "
                f"more than --max-oldest-ready-age {max_age_seconds:g} s",
            )
        )
    return problems


def render_text(overview: Overview) -> str:
    """The human-readable report."""
    lines = [f"later_django: namespace {overview.namespace!r} on database {overview.using!r}", ""]
    lines += _stage_lines(overview)
    lines += ["", "queues:", *_queue_lines(overview)]
    lines += ["", "workers:", *_worker_lines(overview)]
    lines += ["", "partitions:", *_partition_lines(overview)]
    lines += ["", "recurring:", *_recurring_lines(overview)]
    lines += ["", "workflows: " + _workflow_line(overview)]
    size = overview.db_size_bytes
    lines += ["", f"database size: {'unknown' if size is None else f'{size:,} bytes'}"]
    return "\n".join(lines)


def _workflow_line(overview: Overview) -> str:
    """Workflows and batches by state: ``running 2, failed 1, cancelled 0, succeeded 40``."""
    return ", ".join(f"{state} {count}" for state, count in overview.workflows.items())


def _stage_lines(overview: Overview) -> list[str]:
    return text_table(
        ["stage", "jobs", "moves (last minute)"],
        [[f.stage, f.count, overview.transitions.get(f.stage, 0)] for f in overview.stages],
    )


def _queue_lines(overview: Overview) -> list[str]:
    if not overview.queues:
        return ["  none"]
    return text_table(
        ["queue", "ready", "oldest ready (s)", "paused since"],
        [
            [
                q.queue_name,
                q.ready,
                age_seconds(q.oldest_ready_age_ms),
                utc_time(q.paused_at_ms),
            ]
            for q in overview.queues
        ],
    )


def _worker_lines(overview: Overview) -> list[str]:
    if not overview.workers:
        return ["  none live"]
    return text_table(
        ["host", "pid", "concurrency", "busy", "queues", "last heartbeat"],
        [
            [w.host, w.pid, w.concurrency, w.busy, ",".join(w.queues), utc_time(w.heartbeat_at_ms)]
            for w in overview.workers
        ],
    )


def _partition_lines(overview: Overview) -> list[str]:
    if not overview.topics:
        return ["  none configured"]
    lines = []
    for topic in overview.topics:
        lines.append(f"  topic {topic.topic} ({topic.partitions} partitions)")
        if topic.shown:
            lines += ["  " + line for line in _partition_table(topic)]
        if topic.not_shown:
            lines.append(f"  ... {topic.not_shown} more active partitions")
    return lines


def _partition_table(topic: TopicFigure) -> list[str]:
    return text_table(
        ["partition", "head", "stage", "backlog", "owner", "epoch", "blocked"],
        [
            [
                p.partition_id,
                p.head_job_id or "-",
                p.head_stage or "-",
                p.backlog,
                p.lease_owner or "-",
                "-" if p.epoch is None else p.epoch,
                "yes" if p.blocked else "no",
            ]
            for p in topic.shown
        ],
    )


def _recurring_lines(overview: Overview) -> list[str]:
    if not overview.recurring:
        return ["  none configured"]
    return text_table(
        ["id", "cron", "task", "next run", "last run", "sequential"],
        [
            [
                r.recurring_id,
                r.cron,
                r.task_path,
                utc_time(r.next_run_ms),
                utc_time(r.last_run_ms),
                "yes" if r.sequential else "no",
            ]
            for r in overview.recurring
        ],
    )


class Command(BaseCommand):
    help = (
        "Shows later_django's jobs per stage, queue depth and oldest ready age per queue, "
        "live workers, topic partitions and recurring jobs. With --check, exits 3 when fewer "
        "than --min-workers are live, 4 when the oldest ready job is older than "
        "--max-oldest-ready-age seconds."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")
        parser.add_argument(
            "--check",
            action="store_true",
            help="Exit 3 with too few live workers, 4 when a ready job waited too long.",
        )
        parser.add_argument(
            "--max-oldest-ready-age",
            "--max-age",
            dest="max_age",
            type=seconds_of("--max-oldest-ready-age", 0.0, MAX_AGE_SECONDS),
            default=DEFAULT_MAX_AGE_SECONDS,
            metavar="SECONDS",
            help=f"With --check: the oldest ready job's age allowed, 0 to {MAX_AGE_SECONDS:g} "
            f"seconds (default {DEFAULT_MAX_AGE_SECONDS:g}).",
        )
        parser.add_argument(
            "--min-workers",
            type=count_of("--min-workers", 0, MAX_WORKERS),
            default=1,
            metavar="N",
            help=f"With --check: how many live workers are needed, 0 to {MAX_WORKERS:,} "
            "(default 1).",
        )
        parser.add_argument(
            "--database",
            type=name_of("--database"),
            help="Database alias, one of DATABASES (default: LATER['DATABASE']).",
        )
        parser.add_argument(
            "--namespace",
            type=option_type(inputs.namespace, "--namespace"),
            help="Namespace: the configured one or one with data in the database "
            "(default: LATER['NAMESPACE']).",
        )

    def get_version(self) -> str:
        return later_django_version()

    def handle(self, *args: Any, **options: Any) -> None:
        # Again here: call_command's keyword options skip the parser's types.
        if not 0 <= options["max_age"] <= MAX_AGE_SECONDS:
            raise CommandError(
                f"--max-oldest-ready-age {options['max_age']!r} is not between 0 and "
                f"{MAX_AGE_SECONDS:g} seconds"
            )
        if not 0 <= options["min_workers"] <= MAX_WORKERS:
            raise CommandError(
                f"--min-workers {options['min_workers']!r} is not between 0 and {MAX_WORKERS:,}"
            )
        using, namespace = resolve_target(options["database"], options["namespace"])
        if using not in connections.settings:
            raise CommandError(
                f"--database {using!r} is not a database of DATABASES "
                f"(known: {', '.join(sorted(connections.settings))})"
            )
        try:
            with naming_missing_tables(using):
                if not namespace_in_use(using, namespace):
                    raise CommandError(
                        f"--namespace {namespace!r} is neither configured nor seen in database "
                        f"{using!r} (no job, queue, worker or topic of it); configured: "
                        f"{later_settings().namespace!r}"
                    )
                overview = read_overview(using, namespace)
        except TablesMissing as error:
            raise CommandError(str(error)) from error
        problems = (
            health_problems(overview, options["max_age"], options["min_workers"])
            if options["check"]
            else []
        )
        messages = [message for _, message in problems]
        if options["json"]:
            document = overview.as_json()
            if options["check"]:
                document["check"] = {"healthy": not problems, "problems": messages}
            self.stdout.write(json.dumps(document, sort_keys=True))
        else:
            self.stdout.write(render_text(overview))
            if options["check"]:
                self.stdout.write("\ncheck: " + ("healthy" if not problems else "UNHEALTHY"))
        if problems:
            raise CommandError("; ".join(messages), returncode=problems[0][0])
