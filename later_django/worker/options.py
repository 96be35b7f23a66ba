"""What one worker process is asked to do, and where and as whom it does it.

:class:`WorkerOptions` are the command line's choices; :class:`WorkerContext`
adds what is fixed for the life of the process (settings, the process's id,
the stores of its database). Every actor of the worker is given the context.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from django.utils.crypto import get_random_string

from later_django.conf import LaterSettings, later_settings
from later_django.storage.driver import Driver
from later_django.storage.stores import Stores, stores_for
from later_django.worker.telemetry import NO_TELEMETRY, Telemetry

#: How a worker that takes every queue shows its queues (log line, ``later_worker`` row).
EVERY_QUEUE = "*"


@dataclass
class WorkerOptions:
    #: The queues to claim from; ``None``: every queue of the namespace, whatever its
    #: name, including queues first used after the worker started (``QUEUES: []``).
    queues: list[str] | None
    concurrency: int = 10
    burst: bool = False
    max_jobs: int | None = None
    shutdown_timeout: float = 30.0
    lease_seconds: float = 30.0
    #: ``--burst-patience``: how long a burst worker retries a database that does not
    #: answer before it gives up (``worker.process.EXIT_DATABASE_AWAY``).
    burst_patience: float = 60.0
    #: A supervised child's supervisor: once it is gone (``os.getppid()`` changes),
    #: the child stops, with at most ORPHAN_SHUTDOWN_SECONDS of grace.
    parent_pid: int | None = None
    #: ``--health-file``: the liveness file (``worker.health_file``), or None.
    health_file: str | None = None

    @property
    def shown_queues(self) -> list[str]:
        """The queues as the log and the ``later_worker`` row show them: ``["*"]`` for
        every queue."""
        return [EVERY_QUEUE] if self.queues is None else list(self.queues)


@dataclass(frozen=True)
class WorkerContext:
    """One worker process's options, settings, id (``host:pid:random``), stores, and
    where it reports its figures (``--metrics-port``; by default nowhere)."""

    options: WorkerOptions
    settings: LaterSettings
    worker_id: str
    stores: Stores
    telemetry: Telemetry = NO_TELEMETRY

    @classmethod
    def create(cls, options: WorkerOptions, telemetry: Telemetry = NO_TELEMETRY) -> WorkerContext:
        """The context under the current ``LATER`` settings (no database access)."""
        settings = later_settings()
        return cls(
            options=options,
            settings=settings,
            worker_id=f"{socket.gethostname()}:{os.getpid()}:{get_random_string(6)}",
            stores=stores_for(settings.database),
            telemetry=telemetry,
        )

    @property
    def using(self) -> str:
        return self.settings.database

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    @property
    def driver(self) -> Driver:
        return self.stores.driver

    @property
    def lease_ms(self) -> int:
        return int(self.options.lease_seconds * 1000)
