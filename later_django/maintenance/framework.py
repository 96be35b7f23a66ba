"""Maintenance passes: what they are, the registry, and how processes share them.

A pass is a named, bounded unit of upkeep that should run about once per
``interval_seconds`` in a namespace, whichever process runs it: a worker
(``later_worker`` calls :meth:`PassRunner.run_due` from its loop) or
``later_maintenance``.

Registering a pass (one line, at import time of the module that defines it)::

    from later_django.maintenance import MaintenancePass, register_pass

    register_pass(MaintenancePass("recurring", 1.0, tick_recurring))

where ``tick_recurring(context: PassContext) -> int`` does one bounded round
of work and returns how much it did (rows, jobs; 0 when there was nothing).
The module must be imported in every process that runs passes: later_django's
own pass modules are listed in :data:`PASS_MODULES`; a project lists its own
in ``LATER["MAINTENANCE_MODULES"]``. Both are imported by
:func:`load_pass_modules` before the first pass runs.

Coordination (one process per pass and namespace, about once per interval):

* The lease is the one fenced lease (:mod:`later_django.storage.leases`) on the
  key ``<namespace>-pass-<name>`` of ``later_storage``
  (:data:`~later_django.storage.queries.leases.PASS_LEASES`), taken only when
  absent, released or lapsed (one statement; of any number of concurrent takers
  exactly one wins) for ``max(interval, max_run_seconds +
  LEASE_MARGIN_SECONDS)``, the value being the taker's owner id.
* After the run the owner sets the key to expire at the run's start plus the
  interval (or releases it when that moment has passed), both only while the
  key still holds its own owner id and epoch. So the next run anywhere in the namespace is due
  one interval after this one started, and a second process never starts the
  pass while the first still runs.
* A pass keeps its lease by staying inside its budget: ``context.deadline``
  (monotonic) is ``max_run_seconds`` after the start and a pass that loops
  checks ``context.out_of_time()`` between bounded steps. A pass that must go
  longer calls ``context.extend_lease(seconds)`` (owner-checked) first.
* A process that dies mid-pass leaves the key to lapse: at most
  ``max_run_seconds + LEASE_MARGIN_SECONDS`` later (or one interval, if longer)
  another process takes the pass over.

Every process also keeps its own next-try time per pass, so a loop that calls
:meth:`PassRunner.run_due` many times a second does nothing (no query) until a
pass could be due; a pass may also give a cheap read-only ``wanted`` check
(e.g. "is any job due?") that is consulted before the lease write.
"""

from __future__ import annotations

import importlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from django.db import Error as DatabaseError
from django.db import connections

from later_django.conf import LaterSettings
from later_django.core.clock import now_ms
from later_django.core.keys import pass_lease_key
from later_django.storage.leases import LeaseStore
from later_django.storage.queries.leases import PASS_LEASES
from later_django.storage.stores import stores_for

logger = logging.getLogger("later_django.maintenance")

#: Added to a pass's time budget to make its lease's time to live: the time a
#: run may overrun its budget by (one last bounded step) before another process
#: may take the pass over.
LEASE_MARGIN_SECONDS = 30.0

#: later_django's own modules that register passes (imported by ``load_pass_modules``).
PASS_MODULES: list[str] = ["later_django.maintenance.passes"]


@dataclass
class PassContext:
    """What a pass's run function is given.

    ``using``/``namespace``/``settings``: where to work; ``owner``: the id of the
    process holding the lease; ``deadline``: a ``time.monotonic()`` value after
    which the pass should return (its budget).
    """

    using: str
    namespace: str
    settings: LaterSettings
    owner: str
    deadline: float
    lease_key: str = ""
    #: The epoch of the lease this run holds (from its take).
    lease_epoch: int = 0
    #: Set by :meth:`defer`: no process runs the pass again before this (epoch ms).
    not_again_before_ms: int = 0

    def time_left(self) -> float:
        """Seconds left of the budget (0 or less when spent)."""
        return self.deadline - time.monotonic()

    def out_of_time(self) -> bool:
        """True once the budget is spent: a looping pass stops after its current step."""
        return self.time_left() <= 0

    def defer(self, seconds: float) -> None:
        """Asks that no process in the namespace run this pass again for ``seconds``
        from now, even if its interval is shorter (e.g. a back-off after giving up)."""
        self.not_again_before_ms = max(self.not_again_before_ms, now_ms() + _ms(seconds))

    def extend_lease(self, seconds: float) -> bool:
        """Keeps the lease for ``seconds`` more from now; the pass then keeps its own
        end time (``deadline`` is fixed).

        Owner-checked: ``False`` when the lease is no longer this process's (it
        lapsed and another process took it), in which case the pass should stop.
        """
        return _renew_lease(self, now_ms() + _ms(seconds))


@dataclass(frozen=True)
class MaintenancePass:
    """A named, bounded unit of upkeep.

    * ``name``: letters, digits, ``_``/``.``; the lease key is ``<ns>-pass-<name>``.
    * ``interval_seconds``: about how often it runs namespace-wide.
    * ``run(context) -> int``: one bounded round; returns how much it did.
    * ``max_run_seconds``: its time budget (``context.deadline``); the lease
      lives at least this plus ``LEASE_MARGIN_SECONDS``.
    * ``interval_from_settings``: when given, the interval comes from the
      settings instead (``None`` there disables the pass), e.g. vacuum.
    * ``wanted(context) -> bool``: an optional cheap read that says whether the
      pass has anything to do; ``False`` skips it without taking the lease.
    """

    name: str
    interval_seconds: float
    run: Callable[[PassContext], int]
    max_run_seconds: float = 10.0
    interval_from_settings: Callable[[LaterSettings], float | None] | None = None
    wanted: Callable[[PassContext], bool] | None = None

    def __post_init__(self) -> None:
        if (
            not isinstance(self.name, str)
            or not self.name
            or not all(character.isalnum() or character in "_." for character in self.name)
        ):
            raise ValueError(
                f"maintenance pass name {self.name!r} must be non-empty letters, digits, '_' or '.'"
            )
        for label, value in (
            ("interval_seconds", self.interval_seconds),
            ("max_run_seconds", self.max_run_seconds),
        ):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(
                    f"maintenance pass {self.name!r}: {label} must be a positive number "
                    f"of seconds, got {value!r}"
                )
        if not callable(self.run):
            raise TypeError(f"maintenance pass {self.name!r}: run must be callable")

    def interval_for(self, settings: LaterSettings) -> float | None:
        """The interval under ``settings``; ``None`` when the pass is switched off."""
        if self.interval_from_settings is not None:
            return self.interval_from_settings(settings)
        return self.interval_seconds

    def lease_seconds(self, interval: float) -> float:
        return max(interval, self.max_run_seconds + LEASE_MARGIN_SECONDS)


_REGISTRY: dict[str, MaintenancePass] = {}


def register_pass(maintenance_pass: MaintenancePass, *, replace: bool = False) -> MaintenancePass:
    """Adds ``maintenance_pass`` to the registry (passes run in registration order).

    Registering the very same object again is a no-op (a module imported twice);
    another pass under a taken name raises ``ValueError`` unless ``replace``.
    Returns the pass, so it can be used as an expression.
    """
    if not isinstance(maintenance_pass, MaintenancePass):
        raise TypeError(f"register_pass() takes a MaintenancePass, got {maintenance_pass!r}")
    existing = _REGISTRY.get(maintenance_pass.name)
    if existing is not None and existing is not maintenance_pass and not replace:
        raise ValueError(
            f"a maintenance pass named {maintenance_pass.name!r} is already registered "
            f"({existing.run!r}); pass replace=True to replace it"
        )
    _REGISTRY[maintenance_pass.name] = maintenance_pass
    return maintenance_pass


def unregister_pass(name: str) -> None:
    """Removes the pass ``name`` (absent names are ignored); for tests and projects
    that replace a built-in pass with their own."""
    _REGISTRY.pop(name, None)


def load_pass_modules(settings: LaterSettings) -> None:
    """Imports :data:`PASS_MODULES` and ``LATER["MAINTENANCE_MODULES"]`` (cheap once done)."""
    for module in [*PASS_MODULES, *settings.maintenance_modules]:
        importlib.import_module(module)


def registered_passes(settings: LaterSettings | None = None) -> list[MaintenancePass]:
    """The registered passes in registration order (pass modules loaded first when
    ``settings`` is given)."""
    if settings is not None:
        load_pass_modules(settings)
    return list(_REGISTRY.values())


def _retry_seconds(interval: float) -> float:
    """How soon a process looks again at a pass it found not due or leased elsewhere:
    a quarter of the interval (at least 0.5 s), so the namespace-wide run is not
    late by a whole interval when the process that ran it last goes away."""
    return min(interval, max(0.5, interval / 4))


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def pass_leases(using: str) -> LeaseStore:
    """The maintenance-pass leases of the database alias ``using``."""
    return LeaseStore(stores_for(using).driver, PASS_LEASES)


def _renew_lease(context: PassContext, until_ms: int) -> bool:
    """Moves the lease's end, only while it holds this run's owner and epoch."""
    kept = pass_leases(context.using).renew(
        (),
        context.owner.encode(),
        {(context.lease_key,): context.lease_epoch},
        until_ms=until_ms,
        now_ms=now_ms(),
    )
    return bool(kept)


@dataclass(frozen=True)
class PassRun:
    """The outcome of one pass this process ran: how much it did, how long it took,
    or the error it raised (``None`` when it succeeded)."""

    name: str
    done: int
    seconds: float
    error: str | None = None


@dataclass
class PassRunner:
    """Runs the registered passes that are due, for one process and namespace.

    Holds this process's next-try time per pass; :meth:`run_due` is cheap to
    call often. ``names`` limits it to those passes (``None``: all registered).
    """

    using: str
    namespace: str
    settings: LaterSettings
    owner: str
    names: Sequence[str] | None = None
    _next_try: dict[str, float] = field(default_factory=dict)

    def passes(self) -> list[MaintenancePass]:
        passes = registered_passes(self.settings)
        if self.names is None:
            return passes
        known = {p.name for p in passes}
        unknown = sorted(set(self.names) - known)
        if unknown:
            raise ValueError(f"unknown maintenance pass(es) {unknown}; registered: {sorted(known)}")
        return [p for p in passes if p.name in self.names]

    def seconds_until_next(self) -> float:
        """Seconds until this process would look at some pass again (0 if now)."""
        now = time.monotonic()
        waits = [self._next_try.get(p.name, 0.0) - now for p in self.passes()]
        return max(0.0, min(waits, default=1.0))

    def run_due(self, *, force: bool = False) -> list[PassRun]:
        """Runs, one after another, each pass whose interval has elapsed namespace-wide
        and whose lease this process takes; returns what ran.

        ``force`` ignores this process's next-try times (not the namespace's lease).
        A pass that raises is logged and reported in its :class:`PassRun`; the
        others still run. A database error while taking a lease propagates (the
        caller's loop backs off).
        """
        runs = []
        for maintenance_pass in self.passes():
            run = self._run_if_due(maintenance_pass, force=force)
            if run is not None:
                runs.append(run)
        return runs

    def _run_if_due(self, maintenance_pass: MaintenancePass, *, force: bool) -> PassRun | None:
        interval = maintenance_pass.interval_for(self.settings)
        if interval is None:
            return None
        name = maintenance_pass.name
        now = time.monotonic()
        if not force and now < self._next_try.get(name, 0.0):
            return None
        self._next_try[name] = now + _retry_seconds(interval)
        key = pass_lease_key(self.namespace, name)
        context = PassContext(
            using=self.using,
            namespace=self.namespace,
            settings=self.settings,
            owner=self.owner,
            deadline=now + maintenance_pass.max_run_seconds,
            lease_key=key,
        )
        if maintenance_pass.wanted is not None:
            try:
                if not maintenance_pass.wanted(context):
                    return None
            except DatabaseError:
                raise
            except Exception as exc:  # a broken check fails its pass, not the caller
                logger.exception("the 'wanted' check of maintenance pass %r failed", name)
                return PassRun(name=name, done=0, seconds=0.0, error=f"{type(exc).__name__}: {exc}")
        started_ms = now_ms()
        taken = pass_leases(self.using).take(
            (),
            self.owner.encode(),
            [(key,)],
            until_ms=started_ms + _ms(maintenance_pass.lease_seconds(interval)),
            now_ms=started_ms,
        )
        if not taken:
            return None
        context.lease_epoch = taken[(key,)]
        started = time.monotonic()
        self._next_try[name] = started + interval
        error = None
        done = 0
        try:
            done = int(maintenance_pass.run(context) or 0)
        except Exception as exc:  # one pass's failure must not stop the others
            error = f"{type(exc).__name__}: {exc}"
            logger.exception("maintenance pass %r failed", name)
            if isinstance(exc, DatabaseError):
                self._close_broken_connection()
        seconds = time.monotonic() - started
        self._settle_lease(context, max(started_ms + _ms(interval), context.not_again_before_ms))
        # DEBUG: promotion alone runs twice a second; passes log what is notable themselves.
        logger.debug("maintenance pass %r: %d in %.3fs", name, done, seconds)
        return PassRun(name=name, done=done, seconds=seconds, error=error)

    def _settle_lease(self, context: PassContext, next_due_ms: int) -> None:
        """Leaves the lease to end when the pass is next due (released if that has passed)."""
        try:
            if next_due_ms <= now_ms():
                pass_leases(self.using).release(
                    (), self.owner.encode(), [(context.lease_key,)], now_ms=now_ms()
                )
            else:
                _renew_lease(context, next_due_ms)
        except DatabaseError:
            # The lease lapses on its own; the next run may just come a little later.
            logger.warning("could not settle the lease %r", context.lease_key, exc_info=True)
            self._close_broken_connection()

    def _close_broken_connection(self) -> None:
        connection = connections[self.using]
        if connection.in_atomic_block:
            return
        try:
            connection.close_if_unusable_or_obsolete()
        except DatabaseError:
            logger.debug("closing the connection failed", exc_info=True)


def run_due_passes(
    *,
    using: str,
    namespace: str,
    settings: LaterSettings,
    owner: str,
    names: Iterable[str] | None = None,
    force: bool = False,
) -> list[PassRun]:
    """One-shot form of :meth:`PassRunner.run_due` (no next-try memory: every pass is
    looked at, and runs if the namespace's lease says it is due)."""
    runner = PassRunner(
        using=using,
        namespace=namespace,
        settings=settings,
        owner=owner,
        names=None if names is None else list(names),
    )
    return runner.run_due(force=force)
