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

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from later_django.admin.job_tree import ID_TAIL
from later_django.admin.units import human_duration, when
from later_django.admin.workflow_graph import GraphNode, short_task
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import job_key, workflow_jobs_key
from later_django.core.records import decode_fields
from later_django.engine import workflows
from later_django.engine.workflows import WorkflowState
from later_django.exceptions import RecordDecodeError
from later_django.overview.figures import STAGES
from later_django.storage.ports.kv import KeyValuePort
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


@dataclass(frozen=True)
class _Job:
    """What the page shows of a job: a few fields of its record."""

    task_path: str
    stage: str
    #: The jobs it waits for: a fan-in child's parents, a continuation's one.
    parents: tuple[str, ...]
    finished_at_ms: int | None


_FIELDS_READ = ("task_path", "stage", "parent_job_id", "parent_job_ids", "finished_at_ms")


def _read_jobs(kv: KeyValuePort, namespace: str, ids: Sequence[str]) -> dict[str, _Job]:
    """The jobs ``ids`` that have a readable record, by id, in one statement; only the
    fields the page shows are decoded (a record that cannot be decoded is left out,
    and its job shown as gone: its own page says why)."""
    keys = {job_key(namespace, job_id): job_id for job_id in ids}
    jobs = {}
    for key, data in kv.get_many(list(keys)).items():
        try:
            fields = decode_fields(data, _FIELDS_READ)
        except RecordDecodeError:
            continue
        parent, parents = fields["parent_job_id"], fields["parent_job_ids"]
        jobs[keys[key]] = _Job(
            str(fields["task_path"] or ""),
            str(fields["stage"] or ""),
            tuple(parents) if parents else ((parent,) if parent else ()),
            fields["finished_at_ms"],
        )
    return jobs


def waiting_text(job: _Job, jobs: dict[str, _Job]) -> str:
    """What a waiting job waits on: ``2 of 3 parents: reserve_stock#b, #c`` (the
    parents not finished, each named by the end of its id, its task's short name
    given once for a run of parents of the same task; a parent not read is
    ``?#<tail>``)."""
    parents = list(dict.fromkeys(job.parents))
    unfinished = [
        parent
        for parent in parents
        if parent not in jobs or jobs[parent].stage not in stages.FINISHED
    ]
    names = []
    previous = None
    for parent in unfinished[:PARENTS_NAMED]:
        task = short_task(jobs[parent].task_path) if parent in jobs else "?"
        tail = parent[-ID_TAIL:]
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
    jobs = _read_jobs(stores.kv, namespace, ids)
    unread = {
        parent
        for job in jobs.values()
        if job.stage == stages.WAITING
        for parent in job.parents
        if parent not in jobs
    }
    if unread:
        jobs.update(_read_jobs(stores.kv, namespace, sorted(unread)[:READ]))
    nodes = [_node(job_id, jobs.get(job_id), jobs) for job_id in ids]
    detail = WorkflowDetail(
        workflow, nodes[:DRAWN], nodes[DRAWN:], members - len(ids), members, now_ms()
    )
    detail.waiting = [node for node in detail.drawn if node.waiting_on]
    if workflow.state != "running":
        finishes = [jobs[i].finished_at_ms for i in ids if i in jobs]
        detail.last_finish_ms = max((at for at in finishes if at is not None), default=None)
    return detail


def _node(job_id: str, job: _Job | None, jobs: dict[str, _Job]) -> GraphNode:
    if job is None:
        return GraphNode(job_id, "", GONE)
    waiting_on = waiting_text(job, jobs) if job.stage == stages.WAITING else ""
    return GraphNode(job_id, job.task_path, job.stage, job.parents, waiting_on)
