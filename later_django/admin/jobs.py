"""What the job pages read: pages of jobs by stage or partition, and one job in full.

Lists are keyset pages of the job index
(:func:`later_django.admin.job_lists.list_by_stage`, ``job_index_list_by_partition``):
each page costs its size, never a count of the table. The ``enqueued`` list
comes from the delivery queue first (queued jobs that are not on a partition
have no index row), then from the partitioned jobs' index rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from later_django.admin.job_lists import list_by_stage
from later_django.core.keys import children_key, job_key
from later_django.core.records import JobError, JobRecord, decode_record
from later_django.exceptions import RecordDecodeError
from later_django.overview import STAGES
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import JobIndexRow, RangeOrder

#: Jobs per list page.
PAGE_SIZE = 50
#: Continuations shown on a job's page.
CHILDREN_SHOWN = 50


def when(epoch_ms: int | None) -> datetime | None:
    """An aware UTC datetime for an epoch-milliseconds value (``None`` stays ``None``)."""
    if epoch_ms is None:
        return None
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def pretty_json(value: Any) -> str:
    """Indented JSON text of a stored (JSON-compatible) value, for escaped display."""
    try:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class JobRow:
    """One line of a job list."""

    job_id: str
    task_path: str
    stage: str
    stage_at: datetime | None
    created_at: datetime | None
    topic: str | None
    partition_id: int | None
    sequence: int | None
    parent_job_id: str | None


def _job_row(row: JobIndexRow) -> JobRow:
    return JobRow(
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


@dataclass(frozen=True)
class JobPage:
    rows: list[JobRow]
    next_cursor: str | None


def check_stage(stage: str) -> str:
    """``stage`` when it is one; ``ValueError`` naming the stages otherwise."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; stages are {list(STAGES)}")
    return stage


def stage_page(
    using: str, namespace: str, stage: str, cursor: str | None, limit: int = PAGE_SIZE
) -> JobPage:
    """A page of jobs in ``stage``, most recently moved first, after ``cursor``
    (``ValueError`` for a malformed cursor or an unknown stage)."""
    page = list_by_stage(
        stores_for(using).index, namespace, check_stage(stage), cursor or None, limit
    )
    return JobPage([_job_row(row) for row in page.items], page.next_cursor)


def partition_page(
    using: str,
    namespace: str,
    topic: str,
    partition_id: int,
    cursor: str | None,
    limit: int = PAGE_SIZE,
) -> JobPage:
    """A page of one partition's jobs, highest sequence first, after ``cursor``."""
    page = stores_for(using).index.job_index_list_by_partition(
        namespace, topic, partition_id, cursor or None, limit
    )
    return JobPage([_job_row(row) for row in page.items], page.next_cursor)


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
    detail.children = _children(stores, namespace, job_id)
    topic, partition_id, sequence = _partition_place(record, index_row)
    if topic is not None and partition_id is not None and sequence is not None:
        detail.older = stores.index.job_index_partition_neighbor(
            namespace, topic, partition_id, sequence, older=True
        )
        detail.newer = stores.index.job_index_partition_neighbor(
            namespace, topic, partition_id, sequence, older=False
        )
    return detail


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
        child_id = item.value.decode()
        if child_id not in rows:
            rows[child_id] = JobRow(child_id, "", "waiting", None, None, None, None, None, job_id)
    return list(rows.values())[:CHILDREN_SHOWN]
