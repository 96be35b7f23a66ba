"""What the job pages read: pages of jobs by stage or partition, and one job in full.

Lists are keyset pages of the job index
(:func:`later_django.admin.job_lists.scan_stage`, ``job_index_list_by_partition``):
each page costs its size, never a count of the table, plus one read by key of its
jobs' records (queue, attempts, run-at, duration, error). The ``enqueued`` list
comes from the delivery queue first (queued jobs that are not on a partition
have no index row), then from the partitioned jobs' index rows. A task, queue or
error filter is answered by the filter indexes (migration 0018): a keyset page
whose cost is its size, with no cap. The filters they cannot serve (a task
prefix; any filter of the ``enqueued`` list) look at no more than
:data:`SCAN_CAP` rows per page, and the page says where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from later_django import inputs
from later_django.admin.attempts import Attempt, attempts_of
from later_django.admin.job_lists import RowFilter, answered_by_index, filtered_page, scan_stage
from later_django.admin.job_tree import ANCESTORS, JobTree, TreeNode
from later_django.admin.pages import Unknown
from later_django.admin.units import human_duration, when
from later_django.conf import later_settings
from later_django.core import clock, stages
from later_django.core.keys import children_key, job_key, member_child
from later_django.core.records import JobError, JobRecord, decode_record
from later_django.engine.job_actions.selection import JobSelection
from later_django.engine.record_reads import read_records_and_errors
from later_django.engine.topics import configured_topics
from later_django.exceptions import RecordDecodeError
from later_django.overview.figures import STAGES
from later_django.storage.ports.kv import KeyValuePort
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import JobIndexRow, RangeOrder

#: Jobs per list page.
PAGE_SIZE = 50
#: Rows a filtered list looks at per page, at most, for the filters the filter indexes
#: cannot serve (a task prefix; filters of ``enqueued``): at most this many rows read.
SCAN_CAP = 5_000
#: Continuations shown on a job's page (and siblings in its tree).
CHILDREN_SHOWN = 100
#: A fan-in child's parents listed on its page (read by key in one statement).
PARENTS_SHOWN = 100


def pretty_json(value: Any) -> str:
    """Indented JSON text of a stored (JSON-compatible) value, for escaped display."""
    try:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class JobRow:
    """One line of a job list; the fields after ``parent_job_id`` come from the job's
    record (``None`` when it was not read, or cannot be decoded)."""

    job_id: str
    task_path: str
    stage: str
    stage_at: datetime | None
    created_at: datetime | None
    topic: str | None
    partition_id: int | None
    sequence: int | None
    parent_job_id: str | None
    queue_name: str | None = None
    attempts: int | None = None
    #: When a delayed or requeued job will run.
    run_at: datetime | None = None
    #: A finished job's run: finished less started.
    duration_ms: int | None = None
    #: A failed job's last error: its class path and the first line of its message.
    error: str | None = None

    @property
    def duration(self) -> str | None:
        """The run's duration in human units (``None`` when not known)."""
        return None if self.duration_ms is None else human_duration(self.duration_ms)


#: The stages whose jobs wait for a time (``run_after``).
_SCHEDULED = (stages.DELAYED, stages.REQUEUED)


def _job_row(row: JobIndexRow, record: JobRecord | None = None) -> JobRow:
    """The list line of an index row, with what its record adds when given."""
    line = JobRow(
        job_id=row.job_id,
        task_path=row.payload_type,
        stage=row.stage,
        stage_at=when(row.stage_date_ms),
        created_at=when(row.created_at_ms),
        topic=row.topic,
        partition_id=row.partition_id,
        sequence=row.sequence,
        parent_job_id=row.parent_job_id,
    )
    if record is None:
        return line
    failed = row.stage == stages.FAILED and record.errors
    return dataclasses.replace(
        line,
        queue_name=record.queue_name,
        attempts=record.attempts,
        run_at=when(record.run_after_ms) if row.stage in _SCHEDULED else None,
        duration_ms=_duration_ms(record) if row.stage in stages.FINISHED else None,
        error=error_summary(record.errors[-1]) if failed else None,
    )


def _duration_ms(record: JobRecord) -> int | None:
    if record.started_at_ms is None or record.finished_at_ms is None:
        return None
    return max(record.finished_at_ms - record.started_at_ms, 0)


def error_summary(error: JobError) -> str:
    """``<class path>: <first line of the message>`` of a stored error (the class path
    alone when its traceback shows no message)."""
    message = _message_line(error)
    return f"{error.exception_class_path}: {message}" if message else error.exception_class_path


def _message_line(error: JobError) -> str:
    """The first line of the exception's message in its formatted traceback: what
    follows ``<Class>: `` on the first line starting with the class (path or name)."""
    class_name = error.exception_class_path.rpartition(".")[2]
    for line in error.traceback.splitlines():
        if line.startswith((f"{error.exception_class_path}: ", f"{class_name}: ")):
            return line.partition(": ")[2].strip()
    return ""


@dataclass(frozen=True)
class JobPage:
    """A page of a job list. ``scanned`` rows were looked at to fill it; when a
    filtered walk stopped at :data:`SCAN_CAP` before the page was full,
    ``stopped_at`` is the cursor that continues it."""

    rows: list[JobRow]
    next_cursor: str | None
    scanned: int = 0
    stopped_at: str | None = None

    @property
    def scanned_text(self) -> str:
        """``scanned`` with thousands separated (``5,000``)."""
        return f"{self.scanned:,}"


def check_stage(stage: str) -> str:
    """``stage`` when it is one; ``ValueError`` naming the stages otherwise."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages are {list(STAGES)}")
    return stage


class _Records:
    """Job records read by key, one statement per :meth:`read`, kept by job id (an
    undecodable record is left out: its line shows what the index says)."""

    def __init__(self, kv: KeyValuePort, namespace: str) -> None:
        self._kv, self._namespace = kv, namespace
        self.by_id: dict[str, JobRecord] = {}

    def read(self, job_ids: list[str]) -> None:
        """Reads the records of those of ``job_ids`` not read yet, in one statement."""
        missing = [job_id for job_id in job_ids if job_id not in self.by_id]
        if missing:
            found, _undecodable = read_records_and_errors(self._kv, self._namespace, missing)
            self.by_id.update(found)

    def kept_by(self, selection: JobSelection) -> RowFilter:
        """A row filter that reads the rows' records (one statement) and keeps the rows
        whose record passes ``selection``'s record filters (queue, error)."""

        def keep(rows: list[JobIndexRow]) -> list[JobIndexRow]:
            self.read([row.job_id for row in rows])
            return [
                row
                for row in rows
                if (record := self.by_id.get(row.job_id)) is not None
                and selection.picks_record(record)
            ]

        return keep


def stage_page(
    using: str,
    namespace: str,
    selection: JobSelection,
    cursor: str | None,
    limit: int | None = None,
) -> JobPage:
    """A page of the jobs ``selection`` picks (``limit``, else :data:`PAGE_SIZE`),
    most recently moved first, after ``cursor`` (``ValueError`` for a malformed
    cursor or an unknown stage), with their records read by key in one statement.
    Bounded: a task, queue or error filter is a keyset page of a filter index (one
    statement, the page's rows, however few match); a task prefix, or any filter of
    the ``enqueued`` list, looks at :data:`SCAN_CAP` rows at most (records read one
    statement per chunk of rows); the time range is served by the index."""
    check_stage(selection.stage)
    stores = stores_for(using)
    records = _Records(stores.kv, namespace)
    size = PAGE_SIZE if limit is None else limit
    if answered_by_index(selection):
        page = filtered_page(stores.index, namespace, selection, cursor or None, size)
    else:
        keep = records.kept_by(selection) if selection.needs_records else None
        page = scan_stage(stores.index, namespace, selection, cursor or None, size, keep, SCAN_CAP)
    records.read([row.job_id for row in page.items])
    rows = [_job_row(row, records.by_id.get(row.job_id)) for row in page.items]
    return JobPage(rows, page.next_cursor, page.scanned, page.stopped_at)


def partition_page(
    using: str,
    namespace: str,
    topic: str,
    partition_id: int,
    cursor: str | None,
    limit: int = PAGE_SIZE,
) -> JobPage:
    """A page of one partition's jobs, highest sequence first, after ``cursor``, with
    their records read by key in one statement."""
    stores = stores_for(using)
    page = stores.index.job_index_list_by_partition(
        namespace, topic, partition_id, cursor or None, limit
    )
    records = _Records(stores.kv, namespace)
    records.read([row.job_id for row in page.items])
    rows = [_job_row(row, records.by_id.get(row.job_id)) for row in page.items]
    return JobPage(rows, page.next_cursor)


def check_partition(using: str, namespace: str, topic: str, partition_id: int) -> None:
    """:class:`~later_django.admin.pages.Unknown` (404) unless ``topic`` is a topic of
    the namespace (recorded in ``later_topic``, or configured in ``LATER["TOPICS"]``)
    and ``partition_id`` one of its partitions: one read by key."""
    partitions = stores_for(using).topics.stored_partitions(namespace, topic)
    if partitions is None:
        partitions = configured_topics(later_settings()).get(topic)
    if partitions is None:
        raise Unknown(f"topic {inputs.shown(topic)} is not a topic of namespace {namespace!r}")
    if not 0 <= partition_id < partitions:
        raise Unknown(
            f"partition {partition_id} of topic {inputs.shown(topic)} does not exist: "
            f"the topic has {partitions} partitions, 0 to {partitions - 1}"
        )


def job_exists(using: str, namespace: str, job_id: str) -> bool:
    """Whether the job has a record or an index row (two reads by key)."""
    stores = stores_for(using)
    if stores.kv.get(job_key(namespace, job_id)) is not None:
        return True
    return stores.index.job_index_get(namespace, job_id) is not None


@dataclass(frozen=True)
class TimelineEntry:
    stage: str
    at: datetime | None
    current: bool


@dataclass
class JobDetail:
    """One job as its page shows it."""

    job_id: str
    record: JobRecord | None
    decode_error: str | None
    index_row: JobIndexRow | None
    timeline: list[TimelineEntry] = field(default_factory=list)
    errors: list[tuple[JobError, datetime | None]] = field(default_factory=list)
    children: list[JobRow] = field(default_factory=list)
    older: JobIndexRow | None = None
    newer: JobIndexRow | None = None
    args_text: str = ""
    kwargs_text: str = ""
    return_text: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    #: Parents, siblings and continuations; ``None`` when the job has none of them.
    tree: JobTree | None = None
    #: When a delayed or requeued job runs, and how soon (``in 3 min``).
    run_at: datetime | None = None
    run_in: str = ""
    #: A fan-in child's first :data:`PARENTS_SHOWN` parents (stage ``gone``: no record).
    parents: list[TreeNode] = field(default_factory=list)

    @property
    def parents_finished(self) -> int:
        """How many of the listed parents have finished (or are gone)."""
        return sum(p.stage in stages.FINISHED or p.stage == "gone" for p in self.parents)

    @property
    def parents_not_shown(self) -> int:
        ids = [] if self.record is None else self.record.parent_job_ids or []
        return max(len(ids) - len(self.parents), 0)

    @property
    def stage(self) -> str | None:
        if self.record is not None:
            return self.record.stage
        return None if self.index_row is None else self.index_row.stage

    @property
    def workers(self) -> list[tuple[str, list[int]]]:
        """Each worker that ran an attempt, once, in the order of its first attempt,
        with the attempts it ran (the record lists one worker id per attempt, so a
        worker that ran two attempts appears twice there)."""
        attempts: dict[str, list[int]] = {}
        for attempt, worker_id in enumerate(
            [] if self.record is None else self.record.worker_ids, start=1
        ):
            attempts.setdefault(worker_id, []).append(attempt)
        return list(attempts.items())

    @property
    def task_path(self) -> str | None:
        if self.record is not None:
            return self.record.task_path
        return None if self.index_row is None else self.index_row.payload_type


def read_job(using: str, namespace: str, job_id: str) -> JobDetail | None:
    """The job's record and index row with its timeline, errors, continuations and
    partition neighbours; ``None`` when neither record nor index row exists."""
    stores = stores_for(using)
    raw = stores.kv.get(job_key(namespace, job_id))
    index_row = stores.index.job_index_get(namespace, job_id)
    if raw is None and index_row is None:
        return None
    record, decode_error = None, None
    if raw is not None:
        try:
            record = decode_record(raw)
        except RecordDecodeError as error:
            decode_error = str(error)
    detail = JobDetail(job_id, record, decode_error, index_row)
    if record is not None:
        detail.timeline = [
            TimelineEntry(stage, when(at_ms), False) for stage, at_ms in record.history
        ]
        detail.timeline.append(TimelineEntry(record.stage, when(record.stage_at_ms), True))
        detail.errors = [(error, when(error.at_ms)) for error in record.errors]
        detail.args_text = pretty_json(record.args)
        detail.kwargs_text = pretty_json(record.kwargs)
        if record.stage == "success":
            detail.return_text = pretty_json(record.return_value)
        now = clock.now_ms()
        detail.attempts = attempts_of(record, now)
        if record.stage in _SCHEDULED and record.run_after_ms is not None:
            detail.run_at = when(record.run_after_ms)
            detail.run_in = f"in {human_duration(record.run_after_ms - now)}"
    detail.children = _children(stores, namespace, job_id)
    detail.tree = _tree(stores, namespace, detail)
    if record is not None and record.parent_job_ids:
        detail.parents = _parents(stores.kv, namespace, record.parent_job_ids[:PARENTS_SHOWN])
    topic, partition_id, sequence = _partition_place(record, index_row)
    if topic is not None and partition_id is not None and sequence is not None:
        detail.older = stores.index.job_index_partition_neighbor(
            namespace, topic, partition_id, sequence, older=True
        )
        detail.newer = stores.index.job_index_partition_neighbor(
            namespace, topic, partition_id, sequence, older=False
        )
    return detail


def _parents(kv: KeyValuePort, namespace: str, parent_ids: list[str]) -> list[TreeNode]:
    """The fan-in parents ``parent_ids`` in their order, read in one statement; one
    whose record is gone or unreadable is listed with the stage ``gone``."""
    records, _ = read_records_and_errors(kv, namespace, parent_ids)
    return [
        TreeNode(parent_id, records[parent_id].task_path, records[parent_id].stage)
        if parent_id in records
        else TreeNode(parent_id, "", "gone")
        for parent_id in parent_ids
    ]


def _tree(stores: Stores, namespace: str, detail: JobDetail) -> JobTree | None:
    """The job's continuation tree: up to ``ANCESTORS`` parents read by key one after
    the other, the parent's other continuations and the job's own (each at most
    ``CHILDREN_SHOWN``); ``None`` when it has no parent and no continuation."""
    job = TreeNode(detail.job_id, detail.task_path or "", detail.stage or "")
    parent_id = None if detail.record is None else detail.record.parent_job_id
    siblings: list[TreeNode] = []
    if parent_id is not None:
        siblings = [
            TreeNode(row.job_id, row.task_path, row.stage)
            for row in _children(stores, namespace, parent_id)
            if row.job_id != detail.job_id
        ][: CHILDREN_SHOWN - 1]
    ancestors: list[TreeNode] = []
    while parent_id is not None and len(ancestors) < ANCESTORS:
        raw = stores.kv.get(job_key(namespace, parent_id))
        parent = None
        if raw is not None:
            try:
                parent = decode_record(raw)
            except RecordDecodeError:
                parent = None
        if parent is None:  # expired, deleted or unreadable: the walk ends there
            ancestors.append(TreeNode(parent_id, "", "gone"))
            break
        ancestors.append(TreeNode(parent_id, parent.task_path, parent.stage))
        parent_id = parent.parent_job_id
    children = [TreeNode(row.job_id, row.task_path, row.stage) for row in detail.children]
    tree = JobTree(job, list(reversed(ancestors)), siblings, children)
    return None if tree.is_alone else tree


def _partition_place(
    record: JobRecord | None, index_row: JobIndexRow | None
) -> tuple[str | None, int | None, int | None]:
    if record is not None and record.topic is not None:
        return record.topic, record.partition_id, record.sequence
    if index_row is not None:
        return index_row.topic, index_row.partition_id, index_row.sequence
    return None, None, None


def _children(stores: Stores, namespace: str, job_id: str) -> list[JobRow]:
    """Continuations: those still waiting (the parent's range) and those the index
    knows (waiting, delayed, running or finished ones), at most ``CHILDREN_SHOWN``."""
    rows = {
        row.job_id: _job_row(row)
        for row in stores.index.job_index_list_continuations(namespace, job_id, CHILDREN_SHOWN)
    }
    page = stores.kv.range_page(
        children_key(namespace, job_id), None, CHILDREN_SHOWN, RangeOrder.OLDEST_FIRST
    )
    for item in page.items:
        child_id, _all_of = member_child(item.value)
        if child_id not in rows:
            rows[child_id] = JobRow(child_id, "", "waiting", None, None, None, None, None, job_id)
    return list(rows.values())[:CHILDREN_SHOWN]


def stage_total(using: str, namespace: str, stage: str) -> int:
    """The jobs in ``stage`` by the trigger-kept counters (two small reads, no count of
    a big table); ``enqueued`` adds the job queues' ready depth. A finished stage's
    counter includes expired rows the sweep has not removed yet."""
    dashboard = stores_for(using).dashboard
    total = dashboard.stage_totals(namespace).get(stage, 0)
    if stage == stages.ENQUEUED:
        total += sum(ready for _queue, ready in dashboard.queue_depths(namespace))
    return max(total, 0)
