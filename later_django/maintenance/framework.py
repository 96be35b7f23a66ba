"""Maintenance passes: what they are, the registry, and how processes share them.

A pass is a named, bounded unit of upkeep that should run about once per
``interval_seconds`` in a namespace, whichever process runs it: a worker
(``later_worker`` calls :meth:`PassRunner.run_due` from its loop) or
``later_maintenance``.

Registering a pass (one line, at import time of the module that defines it)::

    from later_django.maintenance import MaintenancePass, register_pass

    register_pass(MaintenancePass("close_carts", 60.0, close_stale_carts))

where ``close_stale_carts(context: PassContext) -> int`` does one bounded round
of work and returns how much it did (rows, jobs; 0 when there was nothing).
A pass is :class:`~later_django.maintenance.definition.MaintenancePass`, its
run is given a :class:`~later_django.maintenance.definition.PassContext`.
later_django's own passes are one module each in this package, listed by
:mod:`later_django.maintenance.registry`; a project lists its pass modules in
``LATER["MAINTENANCE_MODULES"]``, imported before the first pass runs.

Coordination (one process per pass and namespace, about once per interval):

* The lease is the one fenced lease (:mod:`later_django.maintenance.lease`) on the
  key ``<namespace>-pass-<name>`` of ``later_storage``, taken only when
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

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db import Error as DatabaseError

from later_django.conf import LaterSettings
from later_django.core.clock import now_ms
from later_django.core.keys import pass_lease_key
from later_django.maintenance.definition import (
    DEFAULT_UNIT,
    MaintenancePass,
    PassContext,
    seconds_to_ms,
)
from later_django.maintenance.lease import pass_leases
from later_django.maintenance.registry import registered_passes
from later_django.storage.stores import stores_for

logger = logging.getLogger("later_django.maintenance")


def _retry_seconds(interval: float) -> float:
    """How soon a process looks again at a pass it found not due or leased elsewhere:
    a quarter of the interval (at least 0.5 s), so the namespace-wide run is not
    late by a whole interval when the process that ran it last goes away."""
    return min(interval, max(0.5, interval / 4))


@dataclass(frozen=True)
class PassRun:
    """What became of one pass this process looked at: how much it did (counted in
    ``unit``: singular, plural), how long it took, the error it raised (``None`` when
    it succeeded), or why it did not run (``skipped``; reported only when asked)."""

    name: str
    done: int
    seconds: float
    error: str | None = None
    skipped: str | None = None
    unit: tuple[str, str] = DEFAULT_UNIT

    def summary(self) -> str:
        """One line's worth: ``"2 rows deleted"``, ``"failed: ..."`` or ``"skipped: ..."``."""
        if self.error is not None:
            return f"failed: {self.error}"
        if self.skipped is not None:
            return f"skipped: {self.skipped}"
        return f"{self.done:,} {self.unit[0] if self.done == 1 else self.unit[1]}"


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

    def run_due(self, *, force: bool = False, report_skipped: bool = False) -> list[PassRun]:
        """Runs, one after another, each pass whose interval has elapsed namespace-wide
        and whose lease this process takes; returns what ran.

        ``force`` ignores this process's next-try times (not the namespace's lease).
        ``report_skipped`` adds a :class:`PassRun` with ``skipped`` set for each pass
        that was looked at and did not run (switched off, nothing to do, not due).
        A pass that raises is logged and reported in its :class:`PassRun`; the
        others still run. A database error while taking a lease propagates (the
        caller's loop backs off).
        """
        runs = []
        for maintenance_pass in self.passes():
            run = self._run_if_due(maintenance_pass, force=force)
            if run is not None and (report_skipped or run.skipped is None):
                runs.append(run)
        return runs

    def _run_if_due(self, maintenance_pass: MaintenancePass, *, force: bool) -> PassRun | None:
        """The pass's run, a skipped :class:`PassRun` saying why it did not run, or
        ``None`` when this process's next-try time for it has not come."""
        name = maintenance_pass.name
        interval = maintenance_pass.interval_for(self.settings)
        if interval is None:
            return self._skipped(maintenance_pass, "switched off by the settings")
        now = time.monotonic()
        if not force and now < self._next_try.get(name, 0.0):
            return None
        self._next_try[name] = now + _retry_seconds(interval)
        context = PassContext(
            using=self.using,
            namespace=self.namespace,
            settings=self.settings,
            owner=self.owner,
            deadline=now + maintenance_pass.max_run_seconds,
            lease_key=pass_lease_key(self.namespace, name),
        )
        go_on, error = self._wanted(maintenance_pass, context)
        if error is not None:
            return PassRun(name=name, done=0, seconds=0.0, error=error)
        if not go_on:
            return self._skipped(maintenance_pass, "nothing to do")
        started_ms = now_ms()
        epoch = pass_leases(self.using).take(
            context.lease_key,
            self.owner,
            until_ms=started_ms + seconds_to_ms(maintenance_pass.lease_seconds(interval)),
            now_ms=started_ms,
        )
        if epoch is None:
            return self._skipped(
                maintenance_pass,
                f"not due (it ran less than its interval, {interval:g} s, ago in namespace "
                f"{self.namespace!r}, or another process runs it now)",
            )
        context.lease_epoch = epoch
        self._next_try[name] = time.monotonic() + interval
        run = self._run(maintenance_pass, context)
        self._settle_lease(
            context, max(started_ms + seconds_to_ms(interval), context.not_again_before_ms)
        )
        # INFO only when it did something: promotion alone runs twice a second.
        logger.log(
            logging.INFO if run.done else logging.DEBUG,
            "maintenance pass %r: %s in %.3fs",
            name,
            run.summary(),
            run.seconds,
            extra={"maintenance_pass": name, "done": run.done, "seconds": round(run.seconds, 6)},
        )
        return run

    @staticmethod
    def _skipped(maintenance_pass: MaintenancePass, why: str) -> PassRun:
        return PassRun(
            name=maintenance_pass.name, done=0, seconds=0.0, skipped=why, unit=maintenance_pass.unit
        )

    def _wanted(
        self, maintenance_pass: MaintenancePass, context: PassContext
    ) -> tuple[bool, str | None]:
        """``(go on, error)``: whether the pass's ``wanted`` check (if any) says it has
        something to do, or the error of a check that raised something other than a
        database error (a database error propagates)."""
        if maintenance_pass.wanted is None:
            return True, None
        try:
            return bool(maintenance_pass.wanted(context)), None
        except DatabaseError:
            raise
        except Exception as exc:  # a broken check fails its pass, not the caller
            logger.exception(
                "the 'wanted' check of maintenance pass %r failed", maintenance_pass.name
            )
            return False, f"{type(exc).__name__}: {exc}"

    def _run(self, maintenance_pass: MaintenancePass, context: PassContext) -> PassRun:
        """Runs the pass once, catching its failure (one pass's failure must not stop
        the others)."""
        started = time.monotonic()
        error = None
        done = 0
        try:
            done = int(maintenance_pass.run(context) or 0)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            logger.exception("maintenance pass %r failed", maintenance_pass.name)
            if isinstance(exc, DatabaseError):
                self._close_broken_connection()
        return PassRun(
            name=maintenance_pass.name,
            done=done,
            seconds=time.monotonic() - started,
            error=error,
            unit=maintenance_pass.unit,
        )

    def _settle_lease(self, context: PassContext, next_due_ms: int) -> None:
        """Leaves the lease to end when the pass is next due (released if that has passed)."""
        try:
            if next_due_ms <= now_ms():
                pass_leases(self.using).release(context.lease_key, self.owner, now_ms=now_ms())
            else:
                context.renew_lease(next_due_ms)
        except DatabaseError:
            # The lease lapses on its own; the next run may just come a little later.
            logger.warning("could not settle the lease %r", context.lease_key, exc_info=True)
            self._close_broken_connection()

    def _close_broken_connection(self) -> None:
        connection = stores_for(self.using).driver.connection
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
