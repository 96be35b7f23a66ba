"""What a worker reports about its own work, for its ``--metrics-port``.

:class:`Telemetry` is the interface the actors call and does nothing; the
Prometheus one (:mod:`~later_django.worker.prometheus_export`) is used when
``later_worker --metrics-port`` is given. Each call is made on the main thread
(or the heartbeat's, for lease losses) after the fact it reports is written, so
a report never delays a job and a failed write reports nothing. Labels come from
:data:`later_django.core.metric_names`: task, queue, outcome, lease; never a job id.
"""

from __future__ import annotations

from collections.abc import Sequence

from later_django.core import stages
from later_django.core.records import JobRecord
from later_django.engine.execution.values import Outcome, StartedJob


def outcome_label(record: JobRecord) -> str | None:
    """The ``outcome`` label of an attempt whose written record is ``record``: its
    finished stage, ``retried`` when it will run again, None while still running
    (a stale outcome the fence refused: nothing ended)."""
    if record.stage == stages.RUNNING:
        return None
    if record.stage in stages.FINISHED:
        return record.stage
    return "retried"


class Telemetry:
    """The worker's reports; this base ignores them (no ``--metrics-port``)."""

    def started(self, jobs: Sequence[StartedJob], now_ms: int) -> None:
        """``jobs`` were claimed and written running at ``now_ms``."""

    def finished(self, outcomes: Sequence[Outcome], records: Sequence[JobRecord]) -> None:
        """The ``outcomes`` were written; ``records`` are the records as written."""

    def timed_out(self, jobs: Sequence[StartedJob], seconds: Sequence[float]) -> None:
        """``jobs`` ran past their deadline and were recorded failed by ``TaskTimeout``
        after running ``seconds``."""

    def lease_lost(self, lease: str, count: int) -> None:
        """``count`` leases of kind ``lease`` (delivery, partition, queue_slot) lapsed
        while this process held them."""

    def database_error(self) -> None:
        """A database error was backed off from."""

    def lock_conflict(self, kind: str) -> None:
        """A turn lost a lock conflict of ``kind`` (deadlock, lock_wait) and runs again."""

    def threads(self, busy: int, total: int) -> None:
        """``busy`` of the ``total`` job threads run a job now (each loop turn)."""

    def flush(self) -> None:
        """Writes whatever is still held back (the process is about to exit)."""


#: The one that ignores everything.
NO_TELEMETRY = Telemetry()
