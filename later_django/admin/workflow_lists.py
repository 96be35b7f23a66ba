"""What the Workflows page reads: workflows newest first, a keyset page at a time,
optionally only those in one state.

A workflow's row key ends in its id, a ULID, so the rows' key order is the order the
workflows were enqueued: a page is one backwards walk of the row keys
(``key_scan_reverse``), one read of those rows by key, and ONE ``counter_scan`` of
their counts (the page's ids are contiguous in key order, so their stripes are one
key range). Never a count of the table. The state is not stored (it follows from the
counts), so a state filter reads pages of :data:`CHUNK` workflows and keeps the
matching ones, looking at no more than :data:`WALK_CAP` workflows per request; the
page then says where it stopped, and a link continues from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from later_django.admin.units import human_duration, when
from later_django.core.clock import now_ms
from later_django.core.keys import workflow_key, workflow_key_bounds
from later_django.engine.workflow_counts import read_counts_many
from later_django.engine.workflows import WorkflowState, decode_row
from later_django.overview.figures import STAGES
from later_django.storage.ports.kv import KeyValuePort
from later_django.storage.stores import stores_for

#: Workflows per page.
PAGE_SIZE = 50
#: What ``state`` can be (``WorkflowState.state``), in the filter's order.
STATES = ("running", "failed", "cancelled", "succeeded")
#: Workflows a state-filtered page looks at, at most, per request.
WALK_CAP = 2_000
#: Workflows read per walk step of a state-filtered page (three statements a step).
CHUNK = 200


@dataclass(frozen=True)
class WorkflowLine:
    """One line of the list: the workflow as read, and the time of the read."""

    workflow: WorkflowState
    read_at_ms: int

    @property
    def workflow_id(self) -> str:
        return self.workflow.row.workflow_id

    @property
    def created_at(self) -> datetime | None:
        return when(self.workflow.row.created_at_ms)

    @property
    def counts(self) -> list[tuple[str, int]]:
        """(stage, jobs) of the stages it has jobs in, in the dashboard's stage order."""
        counts = self.workflow.counts
        return [(stage, counts[stage]) for stage in STAGES if counts.get(stage)]

    @property
    def duration(self) -> str:
        """How long it has run: a running workflow since its enqueue (``running for``);
        one at rest until the ``workflows`` pass settled it (``finished_at_ms``, at
        most one pass interval after its last finish); empty for one at rest the
        pass has not seen yet (its page reads the last finish from its jobs)."""
        row = self.workflow.row
        if self.workflow.state == "running":
            return "running for " + human_duration(self.read_at_ms - row.created_at_ms)
        if row.finished_at_ms is None:
            return ""
        return human_duration(row.finished_at_ms - row.created_at_ms)


@dataclass(frozen=True)
class WorkflowPage:
    """A page of the list. ``next_cursor`` continues it; when a state-filtered walk
    stopped at :data:`WALK_CAP` before the page was full, ``stopped_at`` does
    instead. ``scanned``: workflows looked at."""

    lines: list[WorkflowLine]
    next_cursor: str | None
    scanned: int
    stopped_at: str | None = None


def check_state(state: str) -> str:
    """``state`` when it is one of :data:`STATES`; ``ValueError`` naming them otherwise."""
    if state not in STATES:
        raise ValueError(f"state {state[:40]!r} is not one of {', '.join(STATES)}")
    return state


def read_states(kv: KeyValuePort, namespace: str, ids: list[str]) -> dict[str, WorkflowState]:
    """The workflows ``ids`` (contiguous in key order) with their counts: one read of
    their rows by key and one counter walk. A row that is gone is left out."""
    raw = kv.get_many([workflow_key(namespace, workflow_id) for workflow_id in ids])
    counts = read_counts_many(kv, namespace, ids)
    found = {}
    for workflow_id in ids:
        body = raw.get(workflow_key(namespace, workflow_id))
        if body is not None:
            row = decode_row(workflow_id, body)
            found[workflow_id] = WorkflowState(row, counts.get(workflow_id, {}))
    return found


def workflow_page(
    using: str,
    namespace: str,
    state: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> WorkflowPage:
    """The workflows enqueued before the workflow ``cursor`` (all when ``None``),
    newest first, at most ``limit`` (:data:`PAGE_SIZE` when ``None``); only those in
    ``state`` when given (see the module for the bound)."""
    limit = PAGE_SIZE if limit is None else limit
    kv = stores_for(using).kv
    start, stop = workflow_key_bounds(namespace)
    if cursor is not None:
        stop = workflow_key(namespace, cursor)
    prefix = len(start)
    lines: list[WorkflowLine] = []
    scanned = 0
    read_at = now_ms()
    while True:
        # Unfiltered: one step, the page and one more (which says a next page exists).
        want = limit + 1 - len(lines) if state is None else min(CHUNK, WALK_CAP - scanned)
        ids = [key[prefix:] for key in kv.key_scan_reverse(start, stop, want)]
        found = read_states(kv, namespace, ids)
        for workflow_id in ids:
            scanned += 1
            workflow = found.get(workflow_id)
            if workflow is None or (state is not None and workflow.state != state):
                continue
            if len(lines) == limit:
                return WorkflowPage(lines, lines[-1].workflow_id, scanned)
            lines.append(WorkflowLine(workflow, read_at))
        if len(ids) < want:
            return WorkflowPage(lines, None, scanned)
        stop = workflow_key(namespace, ids[-1])
        if state is not None and scanned >= WALK_CAP:
            return WorkflowPage(lines, None, scanned, stopped_at=ids[-1])
