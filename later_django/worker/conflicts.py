"""A turn that lost a lock conflict runs again at once, a bounded number of times.

A deadlock (the database rolled one transaction back to break it) or a row-lock
wait that timed out is not the database being away: the connection is fine and
the other transaction has most likely finished. The worker's turn is safe to run
again (what it had completed is kept until written, a claim that did not commit
claimed nothing), so it runs again after a pause of a few milliseconds, without the
back-off and the reconnect of :meth:`~later_django.worker.process.ProcessControl.
database_trouble`. Each conflict is counted (``later_lock_conflicts_total{kind}``)
and logged at DEBUG. After :data:`RETRIES` conflicts in a row the error is treated
as any other database error. The driver says what a conflict is
(:meth:`~later_django.storage.driver.Driver.lock_conflict`): 1213 and 1205 on
MySQL/MariaDB, 40P01 and 55P03 on PostgreSQL, nothing on SQLite (whose write lock
is waited for by its busy timeout).
"""

from __future__ import annotations

import logging
import random
import time

from later_django.storage.driver import Driver
from later_django.worker.telemetry import Telemetry

logger = logging.getLogger("later_django.worker")

#: Conflicts in a row retried at once; the next is backed off from as any error.
RETRIES = 5
#: The pause before a retry, in seconds (jittered): long enough for the other
#: transaction of a deadlock to commit, short beside a job.
PAUSE_SECONDS = (0.001, 0.01)


class LockConflicts:
    """Decides, error by error, whether a turn simply runs again."""

    def __init__(self, driver: Driver, telemetry: Telemetry) -> None:
        self.driver = driver
        self.telemetry = telemetry
        self.in_a_row = 0

    def absorb(self, error: BaseException) -> bool:
        """Whether ``error`` is a lost lock conflict within the bound: then it is
        counted and the caller runs its turn again after this call's short pause."""
        kind = self.driver.lock_conflict(error)
        if kind is None or self.in_a_row >= RETRIES:
            return False
        self.in_a_row += 1
        self.telemetry.lock_conflict(kind)
        logger.debug("lock conflict (%s, %d in a row): running the turn again", kind, self.in_a_row)
        time.sleep(random.uniform(*PAUSE_SECONDS))
        return True

    def reset(self) -> None:
        """A turn went through."""
        self.in_a_row = 0
