"""``manage.py later_maintenance``: run the maintenance passes.

It first syncs ``LATER["RECURRING"]`` into the stored definitions as a worker
does at start (one removed from the settings is deleted), when the
``recurring`` pass is among those it runs. ``--once`` runs each pass that is
due in the namespace now (whose namespace lease this process takes), prints one
line per pass (what it did, in its unit, or why it was skipped) and exits: 0
when every pass that ran succeeded, 1 when one raised (the others still ran).
Without it the command loops until SIGTERM/SIGINT, which let the running pass
finish (within its time budget). ``--pass NAME`` (repeatable) limits it to
those passes. ``--recount`` only recounts the stage counters and queue depths from
every row (what the ``reconcile`` pass does only for small tables) and exits.
Workers run the same passes; any number of workers and ``later_maintenance``
processes may run side by side, the lease key
``<namespace>-pass-<name>`` lets one run each pass at a time. Logs through the
logger ``later_django.maintenance``.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import Error as DatabaseError
from django.db import connections
from django.utils.crypto import get_random_string

from later_django.conf import later_settings
from later_django.engine.recurring_settings import sync_configured_recurring
from later_django.maintenance import PassRunner, registered_passes
from later_django.maintenance.recurring import RECURRING
from later_django.management.common import (
    later_django_version,
    log_to_stderr_unless_configured,
    refuse_missing_tables,
)
from later_django.management.options import name_of
from later_django.storage.stores import stores_for
from later_django.worker.bell import Bell

logger = logging.getLogger("later_django.maintenance")

#: Longest sleep of the loop between two looks at the passes.
MAX_SLEEP_SECONDS = 1.0
#: Back-off after a database error, doubled per failure up to the maximum.
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0


def sync_recurring_settings(runner: PassRunner) -> dict[str, int] | None:
    """Makes the stored recurring definitions match ``LATER["RECURRING"]``, as a worker
    does when it starts (a definition removed from the settings is deleted), when the
    ``recurring`` pass is among the runner's; returns the counts, else ``None``."""
    if RECURRING.name not in {p.name for p in runner.passes()}:
        return None
    return sync_configured_recurring(stores=stores_for(runner.using), namespace=runner.namespace)


class Command(BaseCommand):
    help = (
        "Runs later_django's maintenance passes (promote, recurring, sweep, WAL checkpoint, "
        "vacuum, reconcile, queue samples, purge, and those of LATER['MAINTENANCE_MODULES']) "
        "after syncing LATER['RECURRING'] as a worker does: once with --once, printing what "
        "each pass did, else until SIGTERM/SIGINT."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--once",
            action="store_true",
            help="run each pass that is due once, print what each did, then exit "
            "(default: loop until SIGTERM/SIGINT)",
        )
        parser.add_argument(
            "--recount",
            action="store_true",
            help="recount the stage counters and queue depths from every row of the "
            "namespace (reads the whole job index and delivery queue; for counters "
            "changed by hand, e.g. after a TRUNCATE or a restore), then exit",
        )
        parser.add_argument(
            "--pass",
            action="append",
            dest="passes",
            type=name_of("--pass"),
            metavar="NAME",
            help="run only this pass (repeatable; default: every registered pass)",
        )

    def get_version(self) -> str:
        return later_django_version()

    def handle(self, *args: Any, **options: Any) -> None:
        log_to_stderr_unless_configured()
        settings = later_settings()
        refuse_missing_tables(settings.database)
        if options["recount"]:
            self._recount(settings.database, settings.namespace, options["verbosity"])
            return
        names = options["passes"]
        if names:
            known = [p.name for p in registered_passes(settings)]
            unknown = sorted(set(names) - set(known))
            if unknown:
                raise CommandError(
                    f"--pass {', '.join(unknown)}: not a registered maintenance pass "
                    f"(registered: {', '.join(known)})"
                )
        runner = PassRunner(
            using=settings.database,
            namespace=settings.namespace,
            settings=settings,
            owner=f"{socket.gethostname()}:{os.getpid()}:maintenance:{get_random_string(6)}",
            names=names,
        )
        if options["once"]:
            self._once(runner, options["verbosity"])
        else:
            self._loop(runner)

    def _recount(self, using: str, namespace: str, verbosity: int) -> None:
        """The full recount the ``reconcile`` pass leaves to an operator (decision 115)."""
        started = time.monotonic()
        stores_for(using).index.job_index_reconcile_stage_counts(namespace)
        if verbosity >= 1:
            self.stdout.write(
                f"recount: stage counters and queue depths of namespace {namespace!r} "
                f"recounted ({time.monotonic() - started:.3f}s)"
            )

    def _once(self, runner: PassRunner, verbosity: int) -> None:
        counts = sync_recurring_settings(runner)
        runs = runner.run_due(force=True, report_skipped=True)
        if verbosity >= 1:
            if counts is not None:
                self.stdout.write(
                    "recurring sync: " + ", ".join(f"{n} {what}" for what, n in counts.items())
                )
            for run in runs:
                took = "" if run.skipped else f" ({run.seconds:.3f}s)"
                self.stdout.write(f"{run.name}: {run.summary()}{took}")
        if any(run.error for run in runs):
            raise SystemExit(1)

    def _loop(self, runner: PassRunner) -> None:
        # A Bell, not an Event: the handler may interrupt this thread inside
        # ``stop.wait`` and must take no lock (see later_django.worker.bell).
        stop = Bell()
        received: list[int] = []

        def on_signal(signum: int, frame: object) -> None:
            received.append(signum)
            stop.ring()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        logger.info(
            "later_maintenance %s: namespace %r, passes %s",
            runner.owner,
            runner.namespace,
            ", ".join(p.name for p in runner.passes()),
        )
        backoff = 0.0
        synced = False
        while not stop.is_set():
            try:
                if not synced:
                    sync_recurring_settings(runner)
                    synced = True
                for run in runner.run_due():
                    if run.done and not run.error:
                        logger.info("pass %s: %d in %.3fs", run.name, run.done, run.seconds)
                backoff = 0.0
                pause = min(MAX_SLEEP_SECONDS, runner.seconds_until_next())
            except DatabaseError as error:
                backoff = min(MAX_BACKOFF_SECONDS, max(FIRST_BACKOFF_SECONDS, backoff * 2))
                logger.warning("database error (%s); retrying in %.1fs", error, backoff)
                connections[runner.using].close()
                pause = backoff
            stop.wait(max(pause, 0.05))
        if received:
            logger.info("signal %s: stopped after the current pass", received[0])
        logger.info("later_maintenance %s stopped", runner.owner)
