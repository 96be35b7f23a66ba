"""``manage.py later_jobs retry|cancel|delete``: act on many stored jobs at once, in batches.

``retry`` enqueues the failed jobs again; ``cancel`` cancels the jobs of one live
``--stage`` (running ones are asked to stop); ``delete`` deletes the jobs of one
``--stage``. ``--task`` (a task's module path), ``--queue`` and ``--since`` (an
ISO 8601 time: jobs that entered the stage at or after it; a time without an
offset is read in ``TIME_ZONE``) narrow the selection; ``--dry-run`` counts
and writes nothing. Each batch of ``--batch-size`` jobs is its own transaction
(:func:`later_django.api.retry_failed`, :func:`later_django.api.cancel_jobs`,
:func:`later_django.api.delete_jobs`),
so a run over a million failed jobs holds no long transaction and can be
stopped and started again. Exit status 0 also when jobs were refused (the
refusals are printed); 2 for a value an option does not take (an empty one
included: leave a filter out for "any"), 1 for a stage the action does not take.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from later_django import api, inputs
from later_django.conf import later_settings
from later_django.engine.job_actions.selection import (
    BULK_CANCEL_STAGES,
    BULK_DELETE_STAGES,
    DEFAULT_BATCH_SIZE,
    BulkOutcome,
)
from later_django.exceptions import TablesMissing
from later_django.management.common import later_django_version
from later_django.management.options import MAX_BATCH_SIZE, count_of, name_of, option_type
from later_django.storage.tables import naming_missing_tables

_VERBS = {
    "retry": ("retried", "would retry"),
    "cancel": ("cancelled", "would cancel"),
    "delete": ("deleted", "would delete"),
}


class Command(BaseCommand):
    help = "Retry the failed jobs, or cancel or delete the jobs of a stage, in batches."

    def get_version(self) -> str:
        return later_django_version()

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=sorted(_VERBS), help="what to do with the jobs")
        parser.add_argument(
            "--stage",
            type=name_of("--stage"),
            help="the jobs' stage: failed for retry (the default); for cancel one of "
            + ", ".join(BULK_CANCEL_STAGES)
            + "; for delete one of "
            + ", ".join(BULK_DELETE_STAGES),
        )
        parser.add_argument(
            "--task",
            type=option_type(inputs.task_path, "--task"),
            help="only jobs of this task (its module path, e.g. app.tasks.send_mail)",
        )
        parser.add_argument("--queue", type=name_of("--queue"), help="only jobs of this queue")
        parser.add_argument(
            "--since",
            type=option_type(inputs.local_moment, "--since"),
            help="only jobs that entered the stage at or after this ISO 8601 time "
            "(e.g. 2026-12-01T08:00, read in TIME_ZONE, or 2026-12-01T08:00+01:00)",
        )
        parser.add_argument(
            "--batch-size",
            type=count_of("--batch-size", 1, MAX_BATCH_SIZE),
            default=DEFAULT_BATCH_SIZE,
            help=f"jobs per transaction, 1 to {MAX_BATCH_SIZE:,} (default {DEFAULT_BATCH_SIZE})",
        )
        parser.add_argument("--dry-run", action="store_true", help="count, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        action: str = options["action"]
        stage = options["stage"]
        selection = {
            "task": options["task"],
            "queue": options["queue"],
            "since": options["since"],
            "batch_size": options["batch_size"],
            "dry_run": options["dry_run"],
        }
        try:
            with naming_missing_tables(later_settings().database):
                outcome = self._run(action, stage, selection)
        except TablesMissing as error:
            raise CommandError(str(error)) from error
        self.stdout.write(self._report(action, stage or "failed", outcome, options["dry_run"]))

    def _run(self, action: str, stage: str | None, selection: dict[str, Any]) -> BulkOutcome:
        try:
            if action == "retry":
                if stage not in (None, "failed"):
                    raise CommandError(f"retry takes failed jobs only, not --stage {stage!r}")
                return api.retry_failed(**selection)
            if action == "cancel":
                if stage is None:
                    raise CommandError(
                        "cancel needs --stage, one of " + ", ".join(BULK_CANCEL_STAGES)
                    )
                return api.cancel_jobs(stage, **selection)
            else:
                if stage is None:
                    raise CommandError(
                        "delete needs --stage, one of " + ", ".join(BULK_DELETE_STAGES)
                    )
                return api.delete_jobs(stage, **selection)
        except ValueError as error:
            raise CommandError(str(error)) from None

    def _report(self, action: str, stage: str, outcome: BulkOutcome, dry_run: bool) -> str:
        done, would = _VERBS[action]
        lines = [
            f"{would if dry_run else done} {outcome.changed:,} of {outcome.matched:,} "
            f"{stage} job(s) selected, in {outcome.batches:,} batch(es); "
            f"refused {outcome.refused:,}"
        ]
        if action == "cancel" and outcome.requested:
            lines.append(
                f"  of those, {outcome.requested:,} running or on a partition: "
                f"{'would be ' if dry_run else ''}asked to stop, recorded cancelled when they end"
            )
        lines += [f"  refused: {message}" for message in outcome.refusals]
        if outcome.refused > len(outcome.refusals):
            lines.append(f"  ... and {outcome.refused - len(outcome.refusals):,} more")
        return "\n".join(lines)
