"""Operator actions on stored jobs: retry a failed job, run a delayed job now, cancel
a live job, delete a job.

One job at a time (the dashboard's buttons: :func:`retry_failed`, :func:`run_now`,
:func:`delete_job`; :func:`cancel_job`), or every job of a stage that a
:class:`JobSelection` picks, in bounded batches (:func:`retry_selected`,
:func:`cancel_selected`, :func:`delete_selected`, :func:`run_now_selected`: the
native API, ``later_jobs`` and the dashboard's bulk actions).

Each single action is one transaction on the job's database, and each batch is
one: it reads the records under a row lock (PostgreSQL ``FOR UPDATE``; SQLite's
write lock is held by the transaction), checks the stage it found, and writes
every change through the engine (:mod:`later_django.engine.moves`,
:func:`later_django.engine.writes.commit`), so the record, its index row, its
schedule entry and its delivery message change together or not at all.

Jobs on a topic partition are refused, except deleting a finished one and
cancelling a live one (a request its partition's owner carries out): the
partition's order (head, sequence, lease) is the partition code's to keep, and
a retried or re-run job would have to go back through its partition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.db import transaction

from later_django.conf import LaterSettings, later_settings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.commands import ExecuteJob, decode_command
from later_django.core.keys import children_key, due_key, job_key, undecodable_key
from later_django.core.records import JobRecord, decode_record
from later_django.engine import cancellation, moves
from later_django.engine.continuations import commit_releasing_children
from later_django.engine.record_reads import read_records, read_records_and_errors
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import ActionRefused, RecordDecodeError
from later_django.storage.job_filters import INDEX_CURSOR
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import Delete, JobIndexRow, RangeRemove

#: How far after the job became ready its delivery message may have been published.
_PUBLISH_WINDOW_MS = 60_000
#: Queue messages of the job's queue and priority looked at when deleting a queued job.
_MESSAGES_SEARCHED = 500
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

#: What a cancel did to one job (:func:`cancel_job`).
CANCELLED = "cancelled"  # written cancelled: it will never start (again)
REQUESTED = "requested"  # a worker may hold it: asked to stop, recorded cancelled
FINISHED = "finished"  # it had finished already: nothing changed
MISSING = "missing"  # no such job (deleted, or its record expired)
UNREADABLE = "unreadable"  # its record cannot be decoded: the worker that meets it fails it
#: The reason a cancel by an operator records.
CANCEL_REASON = "cancelled by an operator"


# --- checks and moves of one locked record (the single and the bulk actions share them) ---


def _refuse_partitioned(record: JobRecord, action: str) -> None:
    if record.topic is not None:
        raise ActionRefused(
            f"job {record.job_id} is on partition {record.partition_id} of topic "
            f"{record.topic!r}; {action} is not offered for partitioned jobs, whose order "
            "the partition keeps"
        )


def _retry(writes: JobWrites, record: JobRecord, stores: Stores, now: int) -> None:
    """failed -> enqueued, or ``ActionRefused``."""
    _refuse_partitioned(record, "retry")
    if record.stage != stages.FAILED:
        raise ActionRefused(
            f"job {record.job_id} is {record.stage!r}; only a failed job can be retried"
        )
    # The stand-in of an undecodable record (moves.replace_undecodable) has no queue:
    # known from the record itself, without reading its marker key.
    if not record.queue_name:
        raise ActionRefused(
            f"job {record.job_id} failed because its stored record could not be decoded; "
            "there is nothing to run again"
        )
    moves.retry_failed(writes, record, now)


def _delete(writes: JobWrites, record: JobRecord, stores: Stores, now: int) -> None:
    """Every row of the job, or ``ActionRefused``; see :func:`delete_job`."""
    namespace, job_id = record.namespace, record.job_id
    if record.stage not in stages.FINISHED:
        _refuse_partitioned(record, "delete of a live job")
    if record.stage == stages.RUNNING:
        raise ActionRefused(
            f"job {job_id} is running on a worker; wait until it finishes, then delete it"
        )
    # A finished job's continuations were moved when it finished.
    if record.stage not in stages.FINISHED:
        waiting_children = stores.kv.range_count(children_key(namespace, job_id))
        if waiting_children:
            raise ActionRefused(
                f"job {job_id} has {waiting_children} continuation(s) waiting for it; "
                "delete those first"
            )
    if record.stage == stages.ENQUEUED and record.topic is None:
        _delete_queue_message(stores, record)
    writes.add(Delete(job_key(namespace, job_id)))
    writes.add(Delete(undecodable_key(namespace, job_id)))
    if record.stage in (stages.DELAYED, stages.REQUEUED) and record.run_after_ms is not None:
        writes.add(Delete(due_key(namespace, record.run_after_ms, job_id)))
    if record.parent_job_id is not None and record.stage == stages.WAITING:
        writes.add(RangeRemove(children_key(namespace, record.parent_job_id), job_id.encode()))
    writes.unindex(job_id)


def _cancel(writes: JobWrites, record: JobRecord, stores: Stores, now: int) -> str:
    """A live job cancelled (:data:`CANCELLED`) or, where a worker may hold it, a
    request written (:data:`REQUESTED`); ``ActionRefused`` for a finished job."""
    if record.stage in stages.FINISHED:
        raise ActionRefused(f"job {record.job_id} has finished ({record.stage}); nothing to cancel")
    if record.stage == stages.RUNNING or record.topic is not None:
        writes.add(cancellation.request(record))
        return REQUESTED
    if record.stage == stages.ENQUEUED and not _delete_queue_message(stores, record):
        # Claimed at this instant (or not found): the worker that starts it cancels it.
        writes.add(cancellation.request(record))
        return REQUESTED
    if record.stage in (stages.DELAYED, stages.REQUEUED) and record.run_after_ms is not None:
        moves.unschedule(writes, record, record.run_after_ms)
    moves.cancel(writes, record, now, CANCEL_REASON, later_settings())
    return CANCELLED


def _run_now(writes: JobWrites, record: JobRecord, stores: Stores, now: int) -> None:
    _refuse_partitioned(record, "run now")
    if record.stage not in (stages.DELAYED, stages.REQUEUED):
        raise ActionRefused(
            f"job {record.job_id} is {record.stage!r}; only a delayed or requeued job "
            "can be run now"
        )
    if record.run_after_ms is not None:
        moves.unschedule(writes, record, record.run_after_ms)
    moves.make_ready(writes, record, now)


#: An action on one locked record; it may return what it did (a cancel's kind).
_Action = Callable[[JobWrites, JobRecord, Stores, int], str | None]


def _commit(writes: JobWrites, stores: Stores) -> None:
    """Commits an action's writes; a cancel finishes jobs, and their continuations
    move in the same transaction."""
    if writes.finished_records():
        commit_releasing_children(writes, stores, later_settings())
    else:
        commit(writes, stores)


# --- one job ---


def _locked_record(stores: Stores, namespace: str, job_id: str) -> JobRecord:
    """The job's record read under a row lock; ``ActionRefused`` when it is gone or
    cannot be decoded. Call inside ``transaction.atomic``."""
    raw = stores.kv.get_many_for_update([job_key(namespace, job_id)])
    data = raw.get(job_key(namespace, job_id))
    if data is None:
        raise ActionRefused(f"job {job_id} does not exist (deleted, or its record expired)")
    try:
        return decode_record(data)
    except RecordDecodeError as error:
        raise ActionRefused(f"job {job_id} has a record that cannot be decoded: {error}") from None


def _act_on_one(action: _Action, using: str, namespace: str, job_id: str) -> JobRecord:
    stores = stores_for(using)
    with transaction.atomic(using=using):
        record = _locked_record(stores, namespace, job_id)
        writes = JobWrites(namespace)
        action(writes, record, stores, now_ms())
        _commit(writes, stores)
    return record


def retry_failed(using: str, namespace: str, job_id: str) -> JobRecord:
    """failed -> enqueued (an operator move): the job runs once more.

    The errors of earlier attempts are kept, so a retry policy whose retries
    are used up fails the job again at the next error rather than retrying.
    The job's continuations, released when it failed, are not run again.
    Returns the record as written.
    """
    return _act_on_one(_retry, using, namespace, job_id)


def run_now(using: str, namespace: str, job_id: str) -> JobRecord:
    """delayed / requeued -> enqueued at once; its schedule entry is removed.

    Returns the record as written.
    """
    return _act_on_one(_run_now, using, namespace, job_id)


def delete_job(using: str, namespace: str, job_id: str) -> JobRecord:
    """Deletes the job: record, index row, schedule entry, delivery message, and its
    membership in its parent's continuations; returns the record as it was.

    Refused for a running job (a worker holds it), for a job that still has
    continuations waiting for it (delete those first), and for a live job on a
    topic partition. The delivery message of a queued job is looked up among
    the queue's messages published when the job became ready; if it is not
    found (handed back later, or being claimed) it stays, and the worker that
    claims it drops it because the record is gone.
    """
    return _act_on_one(_delete, using, namespace, job_id)


def cancel_job(using: str, namespace: str, job_id: str) -> str:
    """Cancels the job ``job_id``; returns what it did (one transaction):

    * :data:`CANCELLED`: it was delayed, waiting, requeued, or enqueued with its
      delivery message unclaimed. It is written ``cancelled`` and will never start;
      its ``on="success"`` continuations fail, its ``on="finish"`` ones become ready.
    * :data:`REQUESTED`: a worker may hold it (running, its message claimed at this
      instant, or it waits on a topic partition). A request is written; within
      :data:`~later_django.engine.cancellation.POLL_SECONDS` the worker holding it
      sets ``context.cancelled``, and the job is recorded ``cancelled`` whatever its
      task then returns (see :mod:`later_django.engine.cancellation`).
    * :data:`FINISHED` (nothing changed), :data:`MISSING`, or :data:`UNREADABLE` (its
      stored record cannot be decoded; the worker that meets it writes it failed).
    """
    return cancel_many(using, namespace, [job_id])[job_id]


def cancel_many(using: str, namespace: str, job_ids: Sequence[str]) -> dict[str, str]:
    """:func:`cancel_job` for each of ``job_ids``, :data:`DEFAULT_BATCH_SIZE` per
    transaction (call outside a transaction for the batches to commit as they go);
    what was done, by job id. ``job_ids`` may repeat (one answer per id)."""
    stores = stores_for(using)
    done: dict[str, str] = {}
    unique = list(dict.fromkeys(job_ids))
    for start in range(0, len(unique), DEFAULT_BATCH_SIZE):
        batch = unique[start : start + DEFAULT_BATCH_SIZE]
        with transaction.atomic(using=using):
            found, undecodable = read_records_and_errors(
                stores.kv, namespace, batch, for_update=True
            )
            writes = JobWrites(namespace)
            now = now_ms()
            for job_id in batch:
                record = found.get(job_id)
                if record is None:
                    done[job_id] = UNREADABLE if job_id in undecodable else MISSING
                    continue
                try:
                    done[job_id] = _cancel(writes, record, stores, now)
                except ActionRefused:
                    done[job_id] = FINISHED
            _commit(writes, stores)
    return done


def _delete_queue_message(stores: Stores, record: JobRecord) -> bool:
    """Deletes the unclaimed delivery message of the queued ``record``; ``True`` if found.

    The message has no job-id column: it is searched among the unclaimed
    messages of the job's queue and priority published within a minute after
    the job became ready (at most ``_MESSAGES_SEARCHED``, read through the
    claim index), and recognised by its decoded command.
    """
    ready_at = record.ready_at_ms or record.stage_at_ms
    candidates = stores.dashboard.unclaimed_messages_published_between(
        record.namespace,
        record.queue_name,
        record.priority,
        ready_at,
        ready_at + _PUBLISH_WINDOW_MS,
        _MESSAGES_SEARCHED,
    )
    for sequence, payload in candidates:
        try:
            command = decode_command(payload)
        except RecordDecodeError:
            continue
        if isinstance(command, ExecuteJob) and command.job_id == record.job_id:
            return stores.queue.delete_unclaimed(sequence)
    return False


# --- many jobs ---


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
class _Walk:
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


def _walk(
    using: str, namespace: str, batch_size: int, dry_run: bool, max_rows: int | None
) -> _Walk:
    return _Walk(stores_for(using), namespace, batch_size, dry_run, max_rows)


def retry_selected(
    selection: JobSelection,
    *,
    using: str,
    namespace: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    cursor: str | None = None,
    max_rows: int | None = None,
) -> BulkOutcome:
    """Retries every failed job ``selection`` picks (its stage must be ``failed``), as
    :func:`retry_failed` would, ``batch_size`` jobs per transaction; see
    :func:`_in_batches` for what holds, and for ``cursor`` and ``max_rows``."""
    if selection.stage != stages.FAILED:
        raise ValueError(f"only failed jobs can be retried, not stage {selection.stage!r}")
    walk = _walk(using, namespace, batch_size, dry_run, max_rows)
    return _in_batches(_retry, selection, walk, cursor)


def run_now_selected(
    selection: JobSelection,
    *,
    using: str,
    namespace: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    cursor: str | None = None,
    max_rows: int | None = None,
) -> BulkOutcome:
    """Makes every delayed or requeued job ``selection`` picks ready now, as
    :func:`run_now` would, ``batch_size`` jobs per transaction; the stage must be one
    of :data:`BULK_RUN_NOW_STAGES`. See :func:`_in_batches`."""
    if selection.stage not in BULK_RUN_NOW_STAGES:
        raise ValueError(
            f"jobs of stage {selection.stage!r} cannot be run now; the stages that can: "
            f"{', '.join(BULK_RUN_NOW_STAGES)} (the jobs waiting for a time)"
        )
    walk = _walk(using, namespace, batch_size, dry_run, max_rows)
    return _in_batches(_run_now, selection, walk, cursor)


def cancel_selected(
    selection: JobSelection,
    *,
    using: str,
    namespace: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    cursor: str | None = None,
    max_rows: int | None = None,
) -> BulkOutcome:
    """Cancels every job ``selection`` picks, as :func:`cancel_job` would (running
    jobs, and jobs on partitions, are asked to stop: counted in ``requested``),
    ``batch_size`` jobs per transaction; the stage must be a live one. Queued jobs
    are walked through their queue's unclaimed messages (cursor ``q:<sequence>``),
    then the partitioned ones through the job index; see :func:`_in_batches`."""
    if selection.stage not in BULK_CANCEL_STAGES:
        raise ValueError(
            f"jobs of stage {selection.stage!r} cannot be cancelled; the stages that can: "
            f"{', '.join(BULK_CANCEL_STAGES)} (finished jobs are done)"
        )
    walk = _walk(using, namespace, batch_size, dry_run, max_rows)
    in_queue = cursor is None or cursor.startswith(QUEUE_CURSOR)
    if selection.stage != stages.ENQUEUED or selection.job_ids is not None or not in_queue:
        return _in_batches(_cancel, selection, walk, cursor)
    outcome = _queued_in_batches(selection, walk, cursor)
    if outcome.resume_cursor is not None:
        return outcome
    # Jobs queued on partitions have index rows; the index lists no other queued job,
    # so a cancel through it only writes requests, which a dry run's writes discard.
    return _in_batches(_cancel, selection, walk, None, outcome)


def delete_selected(
    selection: JobSelection,
    *,
    using: str,
    namespace: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    cursor: str | None = None,
    max_rows: int | None = None,
) -> BulkOutcome:
    """Deletes every job ``selection`` picks, as :func:`delete_job` would, ``batch_size``
    jobs per transaction; the stage must be one of :data:`BULK_DELETE_STAGES`."""
    if selection.stage not in BULK_DELETE_STAGES:
        raise ValueError(
            f"jobs of stage {selection.stage!r} cannot be deleted in bulk; the stages that "
            f"can: {', '.join(BULK_DELETE_STAGES)} (running jobs are held by a worker; "
            "queued jobs are listed by their queue, not by the job index)"
        )
    walk = _walk(using, namespace, batch_size, dry_run, max_rows)
    return _in_batches(_delete, selection, walk, cursor)


def _in_batches(
    action: _Action,
    selection: JobSelection,
    walk: _Walk,
    cursor: str | None,
    outcome: BulkOutcome | None = None,
) -> BulkOutcome:
    """Walks the stage's index rows newest first from ``cursor`` (exclusive; ``None``:
    from the newest, or from ``selection.until_ms``), ``batch_size`` per page, and
    acts on the selected jobs of each page in one transaction of their own (call
    outside a transaction so each batch commits as it goes). With
    ``selection.job_ids`` those jobs are taken instead, ``batch_size`` per
    transaction, and ``cursor`` is not used.

    Bounded: no transaction holds more than ``batch_size`` jobs, and the walk's
    keyset cursor moves past every page, so a job the action moves out of the stage
    and back (a retried job failing again) is newer than the cursor and not taken
    twice. With ``max_rows`` the walk stops once it has looked at that many index
    rows (matching or not) and sets ``outcome.resume_cursor``: pass it as ``cursor``
    to go on. A job that left the stage between the page's read and its lock is
    refused with the reason. With ``dry_run`` the same checks run on records read
    without a lock and nothing is written.
    """
    outcome = outcome or BulkOutcome()
    if selection.job_ids is not None:
        ids = list(dict.fromkeys(selection.job_ids))
        for start in range(0, len(ids), walk.batch_size):
            batch = ids[start : start + walk.batch_size]
            _act_on_batch(action, batch, selection, *walk.target(), outcome, walk.dry_run)
        return outcome
    index = walk.stores.index
    cursor = cursor or selection.first_cursor()
    while True:
        page = index.job_index_list_by_stage(
            walk.namespace, selection.stage, cursor, walk.page_size()
        )
        done = page.next_cursor is None
        if selection.since_ms is not None:
            done = done or any(row.stage_date_ms < selection.since_ms for row in page.items)
        rows = [row for row in page.items if selection.picks_row(row)]
        if rows:
            job_ids = [row.job_id for row in rows]
            _act_on_batch(action, job_ids, selection, *walk.target(), outcome, walk.dry_run)
        if done:
            return outcome
        cursor = page.next_cursor
        if walk.spend(len(page.items)):
            outcome.resume_cursor = cursor
            return outcome


def _act_on_batch(
    action: _Action,
    job_ids: list[str],
    selection: JobSelection,
    stores: Stores,
    namespace: str,
    outcome: BulkOutcome,
    dry_run: bool,
) -> None:
    """One transaction: the records of ``job_ids`` locked, filtered (queue, error), acted on."""
    # A dry run reads without locks and writes nothing: no transaction to hold.
    with contextlib.nullcontext() if dry_run else transaction.atomic(using=stores.using):
        found, undecodable = read_records_and_errors(
            stores.kv, namespace, job_ids, for_update=not dry_run
        )
        writes = JobWrites(namespace)
        now = now_ms()
        for job_id in job_ids:
            if job_id in undecodable:
                error = undecodable[job_id]
                _refuse(outcome, f"job {job_id} has a record that cannot be decoded: {error}")
                continue
            record = found.get(job_id)
            if record is None:
                continue  # deleted, or expired, since the page was read
            if not selection.picks_record(record):
                continue
            outcome.matched += 1
            if record.stage != selection.stage:
                _refuse(
                    outcome, f"job {job_id} is {record.stage!r} now, no longer {selection.stage!r}"
                )
                continue
            try:
                done = action(JobWrites(namespace) if dry_run else writes, record, stores, now)
            except ActionRefused as refused:
                _refuse(outcome, str(refused))
                continue
            outcome.changed += 1
            outcome.requested += done == REQUESTED
        if not dry_run:
            _commit(writes, stores)
    outcome.batches += 1


def _queued_in_batches(selection: JobSelection, walk: _Walk, cursor: str | None) -> BulkOutcome:
    """Cancels the selected jobs of the job queues' unclaimed messages, newest first
    from ``cursor`` (``q:<sequence>``, exclusive; ``None``: the newest),
    ``batch_size`` messages per transaction: each message deleted (only while still
    unclaimed) and its job written cancelled in one transaction, so a message a
    worker claims meanwhile is left to it, its job refused with the reason. Bounded
    like :func:`_in_batches`: the walk's cursor (the sequence) only goes down, and
    ``max_rows`` counts the messages looked at."""
    outcome = BulkOutcome()
    before = None if cursor is None else _queue_sequence(cursor)
    settings = later_settings()
    while True:
        size = walk.page_size()
        messages = walk.stores.index.queued_messages(walk.namespace, before, size)
        if not messages:
            return outcome
        before = messages[-1].sequence
        picked: list[tuple[int, str]] = []
        for message in messages:
            try:
                command = decode_command(message.payload)
            except RecordDecodeError:
                continue
            if isinstance(command, ExecuteJob) and selection.picks_task(command.payload_type):
                picked.append((message.sequence, command.job_id))
        if picked:
            _cancel_queued(picked, selection, walk, outcome, settings)
        if len(messages) < size:
            return outcome
        if walk.spend(len(messages)):
            outcome.resume_cursor = f"{QUEUE_CURSOR}{before}"
            return outcome


def _queue_sequence(cursor: str) -> int:
    """The sequence of a ``q:<sequence>`` cursor; ``ValueError`` naming it otherwise."""
    try:
        return int(cursor.removeprefix(QUEUE_CURSOR))
    except ValueError:
        raise ValueError(
            f"not a queue cursor: {cursor!r} (expected {QUEUE_CURSOR}<sequence>)"
        ) from None


def _cancel_queued(
    picked: list[tuple[int, str]],
    selection: JobSelection,
    walk: _Walk,
    outcome: BulkOutcome,
    settings: LaterSettings,
) -> None:
    """One transaction of :func:`_queued_in_batches`: the records locked, filtered
    (queue, error, time), each message deleted while unclaimed, the job cancelled."""
    stores, namespace, dry_run = walk.stores, walk.namespace, walk.dry_run
    with contextlib.nullcontext() if dry_run else transaction.atomic(using=stores.using):
        # An undecodable record is left out (and logged): its worker fails it.
        found = read_records(
            stores.kv, namespace, [job_id for _, job_id in picked], for_update=not dry_run
        )
        writes = JobWrites(namespace)
        now = now_ms()
        for sequence, job_id in picked:
            record = found.get(job_id)
            if record is None or record.stage != stages.ENQUEUED:
                continue
            if not (selection.picks_record(record) and selection.picks_time(record.stage_at_ms)):
                continue
            outcome.matched += 1
            if not dry_run and not stores.queue.delete_unclaimed(sequence):
                _refuse(outcome, f"job {job_id} was claimed by a worker meanwhile")
                continue
            if not dry_run:
                moves.cancel(writes, record, now, CANCEL_REASON, settings)
            outcome.changed += 1
        if not dry_run:
            _commit(writes, stores)
    outcome.batches += 1


def _refuse(outcome: BulkOutcome, message: str) -> None:
    outcome.refused += 1
    if len(outcome.refusals) < _REFUSALS_KEPT:
        outcome.refusals.append(message)
