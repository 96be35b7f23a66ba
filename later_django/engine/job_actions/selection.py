"""What a bulk action takes and what it did: :class:`JobSelection` (one stage,
filtered by task, queue, time, last error, or named job ids), :class:`BulkOutcome`,
the stages each bulk action accepts, and a run's bounds (:class:`Walk`).

Pure values: nothing here reads or writes the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from later_django.core import stages
from later_django.core.records import JobRecord
from later_django.storage.job_filters import INDEX_CURSOR
from later_django.storage.stores import Stores
from later_django.storage.types import JobIndexRow

#: Jobs per transaction of a bulk action.
DEFAULT_BATCH_SIZE = 500
#: Refusal messages a bulk outcome keeps (the count covers them all).
_REFUSALS_KEPT = 10
#: The stages whose jobs can be deleted in bulk: every stage with index rows that
#: no worker holds (``running`` is a worker's; the queued jobs of the job queues
#: have no index row, and those of partitions are the partition's).
BULK_DELETE_STAGES = (
    stages.DELAYED,
    stages.WAITING,
    stages.REQUEUED,
    stages.SUCCESS,
    stages.FAILED,
    stages.CANCELLED,
)
#: The stages whose jobs can be cancelled in bulk: every live stage.
BULK_CANCEL_STAGES = stages.LIVE_STAGES
#: The stages whose jobs can be run now in bulk: those waiting for a time.
BULK_RUN_NOW_STAGES = (stages.DELAYED, stages.REQUEUED)
#: The start of a bulk walk's cursor inside the job queues' unclaimed messages
#: (``q:<sequence>``: the messages below that sequence); the job lists use it too.
QUEUE_CURSOR = "q:"


@dataclass(frozen=True)
class JobSelection:
    """The jobs of one stage a bulk action takes: all, or those matching every filter
    given: one task (``task_path``, its module path) or the tasks whose path starts
    with ``task_prefix``; one queue; that entered the stage at or after ``since_ms``
    and at or before ``until_ms``; whose last error is of ``error_class`` (its class
    path). ``job_ids``, when given, names the jobs instead of a walk of the stage (the
    other filters still apply). Expired finished jobs (past their retention) are not
    selected."""

    stage: str
    task_path: str | None = None
    queue_name: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    task_prefix: str | None = None
    error_class: str | None = None
    job_ids: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.stage not in stages.ALL_STAGES:
            raise ValueError(
                f"stage {self.stage!r} is not a stage; use one of {', '.join(stages.ALL_STAGES)}"
            )

    def picks_task(self, task_path: str) -> bool:
        """Whether a job of ``task_path`` passes the task filters."""
        if self.task_path is not None and task_path != self.task_path:
            return False
        return self.task_prefix is None or task_path.startswith(self.task_prefix)

    def picks_time(self, stage_at_ms: int) -> bool:
        """Whether a job that entered its stage at ``stage_at_ms`` is inside the range."""
        if self.since_ms is not None and stage_at_ms < self.since_ms:
            return False
        return self.until_ms is None or stage_at_ms <= self.until_ms

    def picks_row(self, row: JobIndexRow) -> bool:
        """Whether an index row passes the filters an index row can answer (task, time)."""
        return self.picks_task(row.payload_type) and self.picks_time(row.stage_date_ms)

    def picks_record(self, record: JobRecord) -> bool:
        """Whether a record passes the filters only a record can answer (queue, error)."""
        if self.queue_name is not None and record.queue_name != self.queue_name:
            return False
        if self.error_class is None:
            return True
        return bool(record.errors) and record.errors[-1].exception_class_path == self.error_class

    @property
    def needs_records(self) -> bool:
        """Whether some filter is answered by the record only (queue, error)."""
        return self.queue_name is not None or self.error_class is not None

    def first_cursor(self) -> str | None:
        """Where a newest-first walk of the stage's index rows starts: the newest row,
        or with ``until_ms`` the keyset position before every row of the next
        millisecond (``i:<until_ms + 1>:``, an empty job id), so the index answers
        ``until`` without a row being read before it."""
        if self.until_ms is None:
            return None
        return f"{INDEX_CURSOR}:{self.until_ms + 1}:"


@dataclass
class BulkOutcome:
    """What a bulk action did: ``matched`` jobs the selection picked, ``changed`` of
    them retried, cancelled or deleted (with ``dry_run``: that would be), ``refused``
    the rest (the first messages in ``refusals``), in ``batches`` transactions."""

    matched: int = 0
    changed: int = 0
    refused: int = 0
    #: Of ``changed``, by a cancel: the jobs a worker may hold, asked to stop.
    requested: int = 0
    batches: int = 0
    refusals: list[str] = field(default_factory=list)
    #: Set when a run given ``max_rows`` stopped before the end of the stage: the
    #: ``cursor`` that continues the walk after the last job it looked at.
    resume_cursor: str | None = None


@dataclass
class Walk:
    """One bulk run's settings and what is left of its ``max_rows`` (``None``: no bound)."""

    stores: Stores
    namespace: str
    batch_size: int
    dry_run: bool
    rows_left: int | None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {self.batch_size!r}")
        if self.rows_left is not None and self.rows_left < 1:
            raise ValueError(f"max_rows must be at least 1 (or None), not {self.rows_left!r}")

    def target(self) -> tuple[Stores, str]:
        return self.stores, self.namespace

    def page_size(self) -> int:
        """Rows to read next: a batch, or what is left of the bound when smaller."""
        return self.batch_size if self.rows_left is None else min(self.batch_size, self.rows_left)

    def spend(self, rows: int) -> bool:
        """Counts ``rows`` looked at; whether the bound is used up."""
        if self.rows_left is None:
            return False
        self.rows_left -= rows
        return self.rows_left <= 0


def refuse(outcome: BulkOutcome, message: str) -> None:
    outcome.refused += 1
    if len(outcome.refusals) < _REFUSALS_KEPT:
        outcome.refusals.append(message)
