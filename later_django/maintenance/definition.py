"""What a maintenance pass is (:class:`MaintenancePass`) and what its run is given
(:class:`PassContext`). How processes share the passes: :mod:`.framework`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from later_django.conf import LaterSettings
from later_django.core.clock import now_ms
from later_django.maintenance.lease import pass_leases
from later_django.storage.stores import Stores, stores_for

#: Added to a pass's time budget to make its lease's time to live: the time a
#: run may overrun its budget by (one last bounded step) before another process
#: may take the pass over.
LEASE_MARGIN_SECONDS = 30.0
#: What a pass's count counts when it does not say (singular, plural).
DEFAULT_UNIT = ("item done", "items done")


def seconds_to_ms(seconds: float) -> int:
    return round(seconds * 1000)


@dataclass
class PassContext:
    """What a pass's run function is given.

    ``using``/``namespace``/``settings``: where to work (``stores``: the stores of
    ``using``); ``owner``: the id of the process holding the lease; ``deadline``: a
    ``time.monotonic()`` value after which the pass should return (its budget).
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

    @property
    def stores(self) -> Stores:
        """The stores of the database alias ``using``."""
        return stores_for(self.using)

    def time_left(self) -> float:
        """Seconds left of the budget (0 or less when spent)."""
        return self.deadline - time.monotonic()

    def out_of_time(self) -> bool:
        """True once the budget is spent: a looping pass stops after its current step."""
        return self.time_left() <= 0

    def defer(self, seconds: float) -> None:
        """Asks that no process in the namespace run this pass again for ``seconds``
        from now, even if its interval is shorter (e.g. a back-off after giving up)."""
        self.not_again_before_ms = max(self.not_again_before_ms, now_ms() + seconds_to_ms(seconds))

    def extend_lease(self, seconds: float) -> bool:
        """Keeps the lease for ``seconds`` more from now; the pass then keeps its own
        end time (``deadline`` is fixed).

        Owner-checked: ``False`` when the lease is no longer this process's (it
        lapsed and another process took it), in which case the pass should stop.
        """
        return self.renew_lease(now_ms() + seconds_to_ms(seconds))

    def renew_lease(self, until_ms: int) -> bool:
        """Moves the lease's end to ``until_ms``, only while it holds this run's owner
        and epoch."""
        return pass_leases(self.using).renew(
            self.lease_key, self.owner, self.lease_epoch, until_ms=until_ms, now_ms=now_ms()
        )


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
    * ``unit``: what ``run``'s count counts, singular and plural (``("row
      deleted", "rows deleted")``), for ``later_maintenance --once``'s report.
    """

    name: str
    interval_seconds: float
    run: Callable[[PassContext], int]
    max_run_seconds: float = 10.0
    interval_from_settings: Callable[[LaterSettings], float | None] | None = None
    wanted: Callable[[PassContext], bool] | None = None
    unit: tuple[str, str] = DEFAULT_UNIT

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
        """How long a run's lease lives: the interval, or the budget plus
        ``LEASE_MARGIN_SECONDS`` when that is longer."""
        return max(interval, self.max_run_seconds + LEASE_MARGIN_SECONDS)
