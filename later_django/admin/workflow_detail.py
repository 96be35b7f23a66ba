"""What a workflow's page reads: its row and counts, its jobs in join order, their
records, and for each waiting job what it waits on.

Reads by key only, so their cost follows the workflow, not the jobs table: the row
(one read), the counts (one counter walk), the first :data:`READ` job ids of its jobs
range (one range read, plus a count when there are more), their records (one
statement), and the records of parents the waiting jobs name that were not read
(at most one more statement of at most :data:`READ` keys; a batch callback whose
members joined beyond the first :data:`READ`). The first :data:`DRAWN` jobs are
drawn (:mod:`~later_django.admin.workflow_graph`), the rest of those read are
listed in a table; beyond :data:`READ` the page says how many it did not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from later_django.admin.units import human_duration, when
from later_django.admin.workflow_graph import GraphNode, short_task
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import workflow_jobs_key
from later_django.core.records import JobRecord
from later_django.engine import workflows
from later_django.engine.record_reads import read_records
from later_django.engine.workflow_retry import parents_of
from later_django.engine.workflows import WorkflowState
from later_django.overview.figures import STAGES
from later_django.storage.stores import stores_for
from later_django.storage.types import RangeOrder

#: Jobs drawn in the figure, at most (the first to join: parents before children).
DRAWN = 300
#: Jobs read (drawn, then listed in the table of those left out of the figure).
READ = 1_500
#: Parents a waiting job's text names, at most ("and 7 more").
PARENTS_NAMED = 5
#: The stage of a job of the workflow that has no record (deleted, or swept).
GONE = "gone"


@dataclass
class WorkflowDetail:
    """A workflow as its page shows it."""

    workflow: WorkflowState
    #: The first :data:`DRAWN` jobs, for the figure (with their waiting texts).
    drawn: list[GraphNode]
    #: The jobs read but not drawn, for the table.
    listed: list[GraphNode]
    #: Jobs in its range beyond the :data:`READ` read (neither drawn nor listed).
    not_read: int
    #: Every job in its range (its members ever joined, deleted ones included).
    members: int
    read_at_ms: int
    #: The last ``finished_at`` of the jobs read, when the workflow is at rest.
    last_finish_ms: int | None = None
    waiting: list[GraphNode] = field(default_factory=list)

    @property
    def row(self) -> workflows.WorkflowRow:
        return self.workflow.row

    @property
    def created_at(self) -> datetime | None:
        return when(self.row.created_at_ms)

    @property
    def left_out(self) -> int:
        """Jobs not drawn: listed in the table, or not read at all."""
        return len(self.listed) + self.not_read

    @property
    def counts(self) -> list[tuple[str, int]]:
        counts = self.workflow.counts
        return [(stage, counts[stage]) for stage in STAGES if counts.get(stage)]

    @property
    def duration(self) -> str:
        """``running for 3 min`` while running; created → the last finish of its jobs
        once at rest (empty when no finish time was read)."""
        if self.workflow.state == "running":
            return f"running for {human_duration(self.read_at_ms - self.row.created_at_ms)}"
        if self.last_finish_ms is None:
            return ""
        return human_duration(self.last_finish_ms - self.row.created_at_ms)


def waiting_text(record: JobRecord, stage_of: dict[str, JobRecord]) -> str:
    """What a waiting job waits on: ``2 of 3 parents: reserve_stock#b, #c`` (the
    parents not finished, each named by the end of its id, its task's short name
    given once for a run of parents of the same task; a parent not read is
    ``?#<tail>``)."""
    parents = list(dict.fromkeys(parents_of(record)))
    unfinished = [
        parent
        for parent in parents
        if parent not in stage_of or stage_of[parent].stage not in stages.FINISHED
    ]
    names = []
    previous = None
    for parent in unfinished[:PARENTS_NAMED]:
        parent_record = stage_of.get(parent)
        task = short_task(parent_record.task_path) if parent_record is not None else "?"
        tail = parent[-8:]
        names.append(f"#{tail}" if task == previous else f"{task}#{tail}")
        previous = task
    more = len(unfinished) - len(names)
    text = ", ".join(names) + (f" and {more} more" if more > 0 else "")
    noun = "parent" if len(parents) == 1 else "parents"
    return f"{len(unfinished)} of {len(parents)} {noun}: {text}"


def read_detail(using: str, namespace: str, workflow_id: str) -> WorkflowDetail | None:
    """The workflow ``workflow_id`` as its page shows it (see the module for the
    reads), ``None`` when it has no row."""
    stores = stores_for(using)
    workflow = workflows.read(stores, namespace, workflow_id)
    if workflow is None:
        return None
    jobs_key = workflow_jobs_key(namespace, workflow_id)
    page = stores.kv.range_page(jobs_key, None, READ, RangeOrder.OLDEST_FIRST)
    ids = [item.value.decode() for item in page.items]
    members = len(ids) if page.next_cursor is None else stores.kv.range_count(jobs_key)
    records = read_records(stores.kv, namespace, ids)
    waiting = [record for record in records.values() if record.stage == stages.WAITING]
    unread = {p for record in waiting for p in parents_of(record) if p not in records}
    parents = dict(records)
    if unread:
        parents.update(read_records(stores.kv, namespace, sorted(unread)[:READ]))
    nodes = [_node(job_id, records.get(job_id), parents) for job_id in ids]
    detail = WorkflowDetail(
        workflow, nodes[:DRAWN], nodes[DRAWN:], members - len(ids), members, now_ms()
    )
    detail.waiting = [node for node in detail.drawn if node.waiting_on]
    if workflow.state != "running":
        finishes = [r.finished_at_ms for r in records.values() if r.finished_at_ms is not None]
        detail.last_finish_ms = max(finishes, default=None)
    return detail


def _node(job_id: str, record: JobRecord | None, parents: dict[str, JobRecord]) -> GraphNode:
    if record is None:
        return GraphNode(job_id, "", GONE)
    waiting_on = waiting_text(record, parents) if record.stage == stages.WAITING else ""
    return GraphNode(job_id, record.task_path, record.stage, tuple(parents_of(record)), waiting_on)
