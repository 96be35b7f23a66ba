"""``manage.py later_worker``: run jobs.

Options: ``--concurrency N`` threads per process, ``--processes N`` processes
(a supervisor forks them), ``--queue NAME`` (repeatable; default every queue
of the ``LaterBackend`` backends in ``TASKS``, or every queue in the database
when one of them has ``QUEUES: []``), ``--burst`` (exit when nothing
is ready), ``--max-jobs N`` (per process), ``--shutdown-timeout S``,
``--lease-seconds S`` (how long a silent worker keeps its jobs).

A process whose job ran past its timeout drains and exits with ``EXIT_REPLACE``
(3): a supervisor starts another at once, and a single process starts itself again.
A database error that retrying cannot cure (a value the database refuses) stops it
with ``EXIT_NOT_TRANSIENT`` (4); a ``--burst`` worker whose database does not
answer for ``--burst-patience`` seconds gives up with ``EXIT_DATABASE_AWAY`` (5).
Each option's range is in its ``--help``
(:mod:`later_django.management.options`); a value outside it exits 2, naming the
option, the value and the rule.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from later_django import inputs
from later_django.backend import LaterBackend
from later_django.compat.tasks import task_backends
from later_django.conf import later_settings
from later_django.core.keys import RESERVED_PREFIX, is_reserved
from later_django.inputs import BIGINT_MAX
from later_django.management.common import (
    later_django_version,
    log_to_stderr_unless_configured,
    refuse_missing_tables,
)
from later_django.management.options import (
    MAX_CONCURRENCY,
    MAX_PROCESSES,
    MAX_WAIT_SECONDS,
    MIN_LEASE_SECONDS,
    PATH_LENGTH,
    count_of,
    name_of,
    option_type,
    seconds_of,
)
from later_django.worker.health_file import check_writable
from later_django.worker.process import EXIT_REPLACE
from later_django.worker.runner import Worker, WorkerOptions
from later_django.worker.supervisor import supervise
from later_django.worker.telemetry import NO_TELEMETRY, Telemetry


def _metrics_export() -> Any:
    """:mod:`later_django.worker.prometheus_export`, or ``CommandError`` naming the extra."""
    try:
        from later_django.worker import prometheus_export
    except ImportError as error:
        raise CommandError(str(error)) from None
    return prometheus_export


def replace_this_process() -> None:
    """Starts this command again in this process (``os.execv``: same pid, same
    arguments): a single worker whose job thread ran past its timeout cannot stop
    that thread, and has no supervisor to replace it."""
    command = [sys.executable, *sys.orig_argv[1:]]
    print("later_django.worker: a job timed out; starting this worker again", file=sys.stderr)
    sys.stderr.flush()
    os.execv(sys.executable, command)


def default_queues() -> list[str] | None:
    """Every queue named by a ``LaterBackend`` in ``TASKS``, sorted; ``None`` (any queue)
    when one of them has ``QUEUES: []``, which lets a task name any queue."""
    queues: set[str] = set()
    for backend in task_backends.all():
        if isinstance(backend, LaterBackend):
            if backend.any_queue:
                return None
            queues |= set(backend.queues)
    return sorted(queues)


def chosen_queues(requested: list[str] | None) -> list[str] | None:
    """The queues a worker claims from: ``requested`` (``--queue``, in order, once each)
    or the default; ``None`` for every queue. ``CommandError`` for a reserved name, a
    name no ``LaterBackend`` accepts, or no ``LaterBackend`` at all."""
    known = default_queues()
    if known == []:
        raise CommandError(
            "no queues: TASKS has no later_django.backend.LaterBackend backend; add one"
        )
    if not requested:
        return known
    reserved = [name for name in requested if is_reserved(name)]
    if reserved:
        raise CommandError(
            f"--queue {', '.join(reserved)}: queue names starting with {RESERVED_PREFIX!r} "
            "are reserved for later_django's own use"
        )
    unknown = [] if known is None else sorted(set(requested) - set(known))
    if unknown:
        raise CommandError(
            f"--queue {', '.join(unknown)}: not a queue of any LaterBackend in TASKS "
            f"(known: {', '.join(known or [])}; QUEUES: [] allows any name)"
        )
    return list(dict.fromkeys(requested))


def add_work_options(parser: CommandParser) -> None:
    """What a worker runs and how much: threads, processes, queues, burst, max jobs."""
    parser.add_argument(
        "--concurrency",
        type=count_of("--concurrency", 1, MAX_CONCURRENCY),
        default=10,
        metavar="N",
        help=f"job threads in each process, 1 to {MAX_CONCURRENCY:,} (default 10)",
    )
    parser.add_argument(
        "--processes",
        type=count_of("--processes", 1, MAX_PROCESSES),
        default=1,
        metavar="N",
        help=f"worker processes, 1 to {MAX_PROCESSES:,}; above 1 a supervisor forks and "
        "replaces them (default 1)",
    )
    parser.add_argument(
        "--queue",
        action="append",
        dest="queues",
        type=name_of("--queue"),
        metavar="NAME",
        help="run only this queue (repeatable; default: every queue of the LaterBackend "
        "backends in TASKS)",
    )
    parser.add_argument(
        "--burst", action="store_true", help="exit 0 once no job is ready (default: run on)"
    )
    parser.add_argument(
        "--max-jobs",
        type=count_of("--max-jobs", 1, BIGINT_MAX),
        default=None,
        metavar="N",
        help="exit 0 after N jobs (at least 1), in each process (default: no limit)",
    )


def add_timing_options(parser: CommandParser) -> None:
    """How long a stopping worker waits for its jobs, and how long a silent one keeps them."""
    parser.add_argument(
        "--shutdown-timeout",
        type=seconds_of("--shutdown-timeout", 0.001, MAX_WAIT_SECONDS),
        default=30.0,
        metavar="SECONDS",
        help="how long running jobs may finish after SIGTERM/SIGINT, 0.001 to "
        f"{MAX_WAIT_SECONDS:g} (default 30)",
    )
    parser.add_argument(
        "--burst-patience",
        type=seconds_of("--burst-patience", 0.001, MAX_WAIT_SECONDS),
        default=60.0,
        metavar="SECONDS",
        help="with --burst: how long a database that does not answer is retried before "
        f"the worker gives up with exit status 5, 0.001 to {MAX_WAIT_SECONDS:g} (default 60)",
    )
    parser.add_argument(
        "--lease-seconds",
        type=seconds_of("--lease-seconds", MIN_LEASE_SECONDS, MAX_WAIT_SECONDS),
        default=30.0,
        metavar="SECONDS",
        help="how long a job stays with a worker that stopped renewing its lease "
        f"(killed, frozen) before another may run it, {MIN_LEASE_SECONDS:g} to "
        f"{MAX_WAIT_SECONDS:g} (default 30)",
    )


def add_watch_options(parser: CommandParser) -> None:
    """How the worker is watched from outside: Prometheus metrics, the liveness file."""
    parser.add_argument(
        "--metrics-port",
        type=count_of("--metrics-port", 1, 65535),
        default=None,
        metavar="N",
        help="serve this worker's Prometheus metrics on port N (with --processes, the "
        "children's summed, from the supervisor); needs later-django[metrics]",
    )
    parser.add_argument(
        "--metrics-host",
        type=name_of("--metrics-host"),
        default="127.0.0.1",
        metavar="ADDRESS",
        help="the address --metrics-port listens on (default 127.0.0.1; 0.0.0.0 for "
        "every interface)",
    )
    parser.add_argument(
        "--health-file",
        type=option_type(inputs.text, "--health-file", max_length=PATH_LENGTH),
        metavar="PATH",
        help="touch PATH at least every few seconds while the worker's loop turns, also "
        "while the database is down: a liveness probe that needs no database",
    )


def worker_options_of(options: dict[str, Any]) -> WorkerOptions:
    """The command's options as one process's ``WorkerOptions``; ``CommandError`` for a
    health file that cannot be written or a queue it may not claim from."""
    health_file = options["health_file"]
    if health_file is not None:
        try:
            check_writable(health_file)
        except ValueError as error:
            raise CommandError(str(error)) from None
    return WorkerOptions(
        queues=chosen_queues(options["queues"]),
        concurrency=options["concurrency"],
        burst=options["burst"],
        burst_patience=options["burst_patience"],
        max_jobs=options["max_jobs"],
        shutdown_timeout=options["shutdown_timeout"],
        lease_seconds=options["lease_seconds"],
        health_file=health_file,
    )


def serve_metrics(port: int | None, host: str, processes: int) -> tuple[Telemetry, Any]:
    """``--metrics-port``'s server, started: ``(telemetry, None)`` for a single process
    (it serves its own), ``(NO_TELEMETRY, SupervisorExport)`` for a supervisor (it
    serves its children's sums); ``(NO_TELEMETRY, None)`` without a port.
    ``CommandError`` when the port cannot be served."""
    export = None
    telemetry: Telemetry = NO_TELEMETRY
    if port is not None:
        export_module = _metrics_export()
        try:
            if processes == 1:
                telemetry = export_module.serve_process(port, host)
            else:
                export = export_module.SupervisorExport(port, host)
                export.serve()
        except OSError as error:
            if export is not None:
                export.close()
            raise CommandError(f"--metrics-port {port} on {host}: {error}") from None
    return telemetry, export


def run_worker(options: WorkerOptions, telemetry: Telemetry, *, may_replace: bool) -> int:
    """Runs one worker in this process until it stops; returns its exit code. A worker
    left with stuck job threads exits at once (``os._exit``), or, with ``may_replace``
    and ``EXIT_REPLACE``, starts this command again in this process."""
    worker = Worker(options, telemetry)
    worker.install_signal_handlers()
    code = worker.run()
    if worker.has_stuck_threads:
        # Jobs still running at the shutdown timeout were handed back, or given
        # up at their timeout; their threads must not keep the process alive
        # (Python joins the ThreadPoolExecutor's threads at exit).
        sys.stdout.flush()
        sys.stderr.flush()
        if code == EXIT_REPLACE and may_replace:
            replace_this_process()
        os._exit(code)
    return code


def supervise_workers(processes: int, options: WorkerOptions, export: Any, *, burst: bool) -> int:
    """Runs ``processes`` forked workers under a supervisor until it stops; returns its
    exit code. Each child reports to ``export`` (the supervisor's metrics server, closed
    at the end) when there is one."""

    def run_child(parent_pid: int | None = None) -> int:
        telemetry = NO_TELEMETRY if export is None else export.in_child()
        child_options = dataclasses.replace(options, parent_pid=parent_pid)
        return run_worker(child_options, telemetry, may_replace=False)

    try:
        return supervise(
            processes,
            run_child,
            burst=burst,
            health_file=options.health_file,
            child_gone=None if export is None else export.child_gone,
        )
    finally:
        if export is not None:
            export.close()


class Command(BaseCommand):
    help = "Runs later_django jobs until stopped (SIGTERM/SIGINT: graceful; twice: at once)."

    def add_arguments(self, parser: CommandParser) -> None:
        add_work_options(parser)
        add_timing_options(parser)
        add_watch_options(parser)

    def get_version(self) -> str:
        return later_django_version()

    def check(self, *args: Any, databases: Any = None, **kwargs: Any) -> None:
        """The system checks without the models' checks against each database: on
        MySQL those ask the server its version, so a worker started while its database
        is away stopped there with a traceback instead of retrying (decision 272).
        ``manage.py check`` and ``migrate`` still run them."""
        super().check(*args, databases=[], **kwargs)

    def handle(self, *args: Any, **options: Any) -> None:
        log_to_stderr_unless_configured()
        refuse_missing_tables(later_settings().database)
        worker_options = worker_options_of(options)
        processes, burst = options["processes"], options["burst"]
        telemetry, export = serve_metrics(
            options["metrics_port"], options["metrics_host"], processes
        )
        if processes == 1:
            # A single worker replaces itself after a timeout (no supervisor would).
            code = run_worker(worker_options, telemetry, may_replace=not burst)
        else:
            code = supervise_workers(processes, worker_options, export, burst=burst)
        if code:
            raise SystemExit(code)
