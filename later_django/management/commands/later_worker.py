"""``manage.py later_worker``: run jobs.

Options: ``--concurrency N`` threads per process, ``--processes N`` processes
(a supervisor forks them), ``--queue NAME`` (repeatable; default every queue
of the ``LaterBackend`` backends in ``TASKS``), ``--burst`` (exit when nothing
is ready), ``--max-jobs N`` (per process), ``--shutdown-timeout S``,
``--lease-seconds S`` (how long a silent worker keeps its jobs).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from later_django.backend import LaterBackend
from later_django.compat.tasks import task_backends
from later_django.worker.runner import Worker, WorkerOptions
from later_django.worker.supervisor import supervise


def default_queues() -> list[str]:
    """Every queue named by a ``LaterBackend`` in ``TASKS``, sorted."""
    queues: set[str] = set()
    for backend in task_backends.all():
        if isinstance(backend, LaterBackend):
            queues |= set(backend.queues)
    return sorted(queues)


def _log_to_stderr_unless_configured() -> None:
    """Without a LOGGING configuration for it, the ``later_django`` logger writes
    INFO and above to stderr (Django's per-task INFO lines stay silent)."""
    logger = logging.getLogger("later_django")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    )
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise ValueError(text)
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


class Command(BaseCommand):
    help = "Runs later_django jobs until stopped (SIGTERM/SIGINT: graceful; twice: at once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--concurrency", type=_positive(int), default=10)
        parser.add_argument("--processes", type=_positive(int), default=1)
        parser.add_argument("--queue", action="append", dest="queues", metavar="NAME")
        parser.add_argument("--burst", action="store_true")
        parser.add_argument("--max-jobs", type=_positive(int), default=None)
        parser.add_argument("--shutdown-timeout", type=_positive(float), default=30.0)
        parser.add_argument("--lease-seconds", type=_positive(float), default=30.0)

    def handle(self, *args: Any, **options: Any) -> None:
        _log_to_stderr_unless_configured()
        known = default_queues()
        queues = options["queues"] or known
        if not queues:
            raise CommandError(
                "no queues: TASKS has no later_django.backend.LaterBackend backend; "
                "add one or pass --queue NAME"
            )
        unknown = sorted(set(queues) - set(known))
        if unknown:
            raise CommandError(
                f"--queue {', '.join(unknown)}: not a queue of any LaterBackend in TASKS "
                f"(known: {', '.join(known) or 'none'})"
            )
        worker_options = WorkerOptions(
            queues=list(dict.fromkeys(queues)),
            concurrency=options["concurrency"],
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            shutdown_timeout=options["shutdown_timeout"],
            lease_seconds=options["lease_seconds"],
        )

        def run_one(parent_pid: int | None = None) -> int:
            worker = Worker(dataclasses.replace(worker_options, parent_pid=parent_pid))
            worker.install_signal_handlers()
            code = worker.run()
            if worker.in_flight:
                # Jobs still running at the shutdown timeout were handed back; their
                # threads must not keep the process alive (Python joins the
                # ThreadPoolExecutor's threads at exit, i.e. until the jobs end).
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
            return code

        processes = options["processes"]
        if processes == 1:
            code = run_one()
        else:
            code = supervise(processes, run_one, burst=options["burst"])
        if code:
            raise SystemExit(code)
