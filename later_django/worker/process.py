"""The worker process's life: stop signals, a vanished supervisor, database back-off.

The first SIGTERM/SIGINT rings ``stopping`` (the loop stops claiming, running
jobs may finish within the shutdown timeout). The second rings ``exiting``: the
main thread, at its next safe place (the drain's turn), makes one attempt to hand
the running jobs back (``WorkerLost`` now, see ``worker.drain.exit_at_once``) and
exits with status 1; a watchdog thread exits with status 1 anyway once
HAND_BACK_SECONDS have passed since that signal (a database that does not answer,
a main thread stuck in a statement). A third signal exits at once. A supervised
child whose supervisor is gone (its parent pid changed) stops as at a first
signal, with at most ORPHAN_SHUTDOWN_SECONDS of grace. A database error is
logged, the connection closed, and the action retried after a jittered
exponential back-off (0.1 s doubling to 5 s) that a stop signal cuts short; unless
retrying cannot cure it (:func:`is_transient`): then :class:`NotTransient` stops
the worker, which exits with :data:`EXIT_NOT_TRANSIENT`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from django.db import DataError, ProgrammingError, connections
from django.db import Error as DatabaseError

from later_django.worker.bell import Bell
from later_django.worker.health_file import HealthFile, child_path
from later_django.worker.options import WorkerOptions
from later_django.worker.telemetry import NO_TELEMETRY, Telemetry

logger = logging.getLogger("later_django.worker")

#: How long an orphaned child (its supervisor died) lets running jobs finish
#: before it hands them back and exits (capped by ``--shutdown-timeout``).
ORPHAN_SHUTDOWN_SECONDS = 5.0
#: How long after a second stop signal the process exits at the latest, whether
#: or not the hand-back of its running jobs got through.
HAND_BACK_SECONDS = 2.0
#: SQLSTATE of "prepared statement … does not exist" (SQL standard's
#: invalid_sql_statement_name): what a worker's prepared statements meet behind a
#: pooler in transaction mode.
MISSING_PREPARED_STATEMENT = "26000"
#: SQLSTATE of "prepared statement … already exists": its twin behind such a pooler
#: (another client's statement of the same name on the server connection).
DUPLICATE_PREPARED_STATEMENT = "42P05"
MISSING_PREPARED_STATEMENT_HINT = (
    "; a prepared statement is missing on the server: is this worker behind PgBouncer "
    "in transaction pooling? Give workers session pooling or a direct connection, or "
    "set LATER['WORKER_PREPARED_STATEMENTS'] = False (docs/operations.md, PgBouncer)"
)


@dataclass
class Backoff:
    """Jittered exponential delays for one run of consecutive failures."""

    delay: float = 0.0
    failures: int = 0
    #: ``time.monotonic()`` of the first failure of the run (None: no failure).
    failing_since: float | None = None

    def next(self) -> float:
        if self.failures == 0:
            self.failing_since = time.monotonic()
        self.failures += 1
        self.delay = min(5.0, 0.1 * 2 ** (self.failures - 1))
        return self.delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        """A success: logs, at INFO, how long the database failed when it had (the
        reconnect an operator looks for after the warnings), and starts afresh."""
        if self.failures and self.failing_since is not None:
            logger.info(
                "database answers again after %d failed attempt(s) over %.1fs",
                self.failures,
                time.monotonic() - self.failing_since,
            )
        self.failures = 0
        self.failing_since = None


#: The ``ProgrammingError``s a pooler in transaction mode causes, which a new
#: connection may cure: retried like a database that is away.
POOLER_STATES = frozenset({MISSING_PREPARED_STATEMENT, DUPLICATE_PREPARED_STATEMENT})
#: What a statement of the worker may raise: Django's database errors, and the
#: ``OverflowError`` sqlite3 raises, unwrapped, for an integer past 64 bits.
STATEMENT_ERRORS = (DatabaseError, OverflowError)
#: The exit status of a worker stopped by an error that retrying cannot cure.
EXIT_NOT_TRANSIENT = 4


class NotTransient(Exception):
    """A database error that retrying cannot cure (:func:`is_transient`): the worker
    stops claiming, lets its running jobs finish, and exits with
    :data:`EXIT_NOT_TRANSIENT`."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(f"{type(error).__name__}: {error}")


#: The exit status of a ``--burst`` worker whose database did not answer for its
#: ``--burst-patience``: a burst is one pass over the work, and always ends.
EXIT_DATABASE_AWAY = 5


class DatabaseAway(NotTransient):
    """A ``--burst`` worker's database has not answered for its patience: the worker
    stops as for :class:`NotTransient`, and exits with :data:`EXIT_DATABASE_AWAY`."""

    def __init__(self, error: BaseException, seconds: float) -> None:
        super().__init__(error)
        self.seconds = seconds


def is_transient(error: BaseException) -> bool:
    """Whether retrying may cure ``error``: yes for a database that is away, busy or
    in conflict with another writer (``OperationalError``, ``InterfaceError``,
    ``IntegrityError``, ``InternalError``, ``NotSupportedError``), and for a prepared
    statement missing, or already there, behind a pooler (:data:`POOLER_STATES`).
    No for a value the database refuses (``DataError``: out of range, invalid;
    sqlite3's ``OverflowError``) and a statement it cannot run (``ProgrammingError``:
    a missing table or column, a missing privilege): the same statement meets the
    same error every time, so a setting or an option is wrong and the operator must
    be told, not a log filled for ever."""
    if isinstance(error, OverflowError | DataError):
        return False
    if isinstance(error, ProgrammingError):
        cause = error.__cause__ if error.__cause__ is not None else error
        return getattr(cause, "sqlstate", None) in POOLER_STATES
    return True


#: The exit status of a process that asks to be replaced: a job ran past its timeout
#: and its thread cannot be stopped. The supervisor replaces it at once; a single
#: ``later_worker`` process starts itself again (``os.execv``).
EXIT_REPLACE = 3


def _health_file(options: WorkerOptions) -> HealthFile | None:
    """This process's health file: ``--health-file``, or a supervised child's own."""
    if options.health_file is None:
        return None
    if options.parent_pid is None:
        return HealthFile(options.health_file)
    return HealthFile(child_path(options.health_file, os.getpid()))


class ProcessControl:
    """The process's bells and stop state; what every actor asks before going on.

    ``wake`` is rung by whatever may bring work (a job's end, a notification, a
    signal); ``stopping`` by the first stop signal, ``exiting`` by the second. They
    are :class:`Bell`, not ``threading.Event``: the signal handler rings them (see
    ``worker.bell``). ``stop_threads`` ends the helper threads (heartbeat,
    listener) at exit.
    """

    def __init__(
        self, options: WorkerOptions, using: str, telemetry: Telemetry = NO_TELEMETRY
    ) -> None:
        self.options = options
        self.using = using
        self.telemetry = telemetry
        self.wake = Bell()
        self.stopping = Bell()
        self.exiting = Bell()
        self.stop_threads = threading.Event()
        self.signals_seen = 0
        self.stop_signal: int | None = None
        #: Why this process must be replaced once drained (a job ran past its timeout).
        self.replace_reason: str | None = None
        self.health = _health_file(options)

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT stop the worker; unblocks them (a supervised child starts
        with them blocked, so one that came during its start-up is handled now).
        Starts the exit watchdog first: a handler must not start a thread."""
        watchdog = threading.Thread(target=self._exit_watchdog, name="later-exit", daemon=True)
        watchdog.start()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

    def _on_signal(self, signum: int, frame: object) -> None:
        """Takes no lock and touches no database (it may interrupt this very thread
        inside either): counts and rings the bells; a third signal exits at once.
        The main thread logs the stop and does the second signal's hand-back."""
        self.signals_seen += 1
        if self.signals_seen > 2:
            os._exit(1)
        if self.signals_seen == 2:
            self.exiting.ring()
        else:
            self.stop_signal = signum
        self.stopping.ring()
        self.wake.ring()

    def _exit_watchdog(self) -> None:
        """On its own thread: once ``exiting`` rings, exits with status 1 after
        HAND_BACK_SECONDS unless the main thread has exited first."""
        self.exiting.wait()
        time.sleep(HAND_BACK_SECONDS)
        # Not through logging: the main thread may hold a handler's lock for good.
        with contextlib.suppress(OSError):
            os.write(2, b"later_django.worker: hand-back not done in time; exiting\n")
        os._exit(1)

    def exit_now(self, code: int) -> NoReturn:
        """Ends the process with ``code`` without waiting for job threads."""
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)

    def orphaned(self) -> bool:
        parent = self.options.parent_pid
        return parent is not None and os.getppid() != parent

    def should_stop(self) -> bool:
        """Stop claiming: a stop signal came, or the supervisor is gone."""
        return self.stopping.is_set() or self.orphaned()

    def shutdown_seconds(self) -> float:
        """How long running jobs may still finish once stopping."""
        if self.orphaned():
            return min(self.options.shutdown_timeout, ORPHAN_SHUTDOWN_SECONDS)
        return self.options.shutdown_timeout

    def alive(self) -> None:
        """The loop is turning: touches the health file (``--health-file``), if any."""
        if self.health is not None:
            self.health.touch()

    def replace(self, reason: str) -> None:
        """Stop claiming, drain, and exit to be replaced (:data:`EXIT_REPLACE`)."""
        if self.replace_reason is None:
            self.replace_reason = reason
        self.stopping.ring()
        self.wake.ring()

    def announce_stop(self) -> None:
        if self.replace_reason is not None and self.stop_signal is None:
            logger.warning(
                "%s: not claiming, finishing the other running jobs (at most %.0fs), "
                "then this process is replaced",
                self.replace_reason,
                self.shutdown_seconds(),
            )
        elif self.orphaned():
            logger.warning(
                "supervisor %d is gone: finishing running jobs (at most %.0fs), then exiting",
                self.options.parent_pid,
                self.shutdown_seconds(),
            )
        elif self.stopping.is_set():
            logger.info("signal %s: finishing running jobs, then exiting", self.stop_signal)

    def with_retries(self, action: Callable[[], object]) -> None:
        """Runs ``action`` until it raises no database error; once stopping, gives up
        (re-raises) after the fourth failure in a row. :class:`NotTransient` for an
        error that retrying cannot cure."""
        backoff = Backoff()
        while True:
            try:
                action()
                backoff.reset()
                return
            except STATEMENT_ERRORS as error:
                if self.exiting.is_set():
                    raise
                self.database_trouble(error, backoff)
                if self.stopping.is_set() and backoff.failures > 3:
                    raise

    def database_trouble(self, error: Exception, backoff: Backoff) -> None:
        """Logs ``error``, closes the connection, and waits the next back-off delay
        (cut short by a stop signal); raises :class:`NotTransient` instead, ringing
        ``stopping``, when retrying cannot cure ``error``, and :class:`DatabaseAway`
        when a ``--burst`` worker's database has failed for its ``burst_patience``."""
        if not is_transient(error):
            self.stopping.ring()
            self.wake.ring()
            raise NotTransient(error) from error
        failing_for = time.monotonic() - (backoff.failing_since or time.monotonic())
        if self.options.burst and failing_for >= self.options.burst_patience:
            self.stopping.ring()
            self.wake.ring()
            raise DatabaseAway(error, failing_for) from error
        delay = backoff.next()
        self.telemetry.database_error()
        logger.warning(
            "database error (%s%s); retrying in %.2fs", error, trouble_hint(error), delay
        )
        # Alive, if the database is not: a liveness probe must not restart the fleet.
        self.alive()
        with contextlib.suppress(Exception):
            connections[self.using].close()
        # Once stopping, that bell is rung and would not wait: the second signal's
        # bell cuts the wait short instead.
        if self.stopping.is_set():
            self.exiting.wait(delay)
        else:
            self.stopping.wait(delay)


def trouble_hint(error: BaseException) -> str:
    """What to add to the log line of a database ``error``: the likely cause and fix
    of a missing prepared statement (the driver's error is Django's ``__cause__``),
    else nothing."""
    cause = error.__cause__ if error.__cause__ is not None else error
    if getattr(cause, "sqlstate", None) == MISSING_PREPARED_STATEMENT:
        return MISSING_PREPARED_STATEMENT_HINT
    return ""
