"""A workflow (``later_django.workflow.Workflow``) or a batch (``later_django.batches``)
as one unit: its row, its jobs, its counts by stage, and cancelling it.

Stored in ``later_storage`` and ``later_storage_range``, no table of its own:

* the row, ``<ns>-flow-<id>`` (``core.keys.workflow_key``): :class:`WorkflowRow` as
  MessagePack, written once, in the transaction that enqueues the workflow;
* its jobs, the range ``<ns>-flow-<id>-jobs``: one member per job id, added by the
  transaction that enqueues the job (:func:`join`), so the range holds every job
  the workflow has, in the order they joined (parents before their children;
  :mod:`~later_django.engine.workflow_members`);
* its counts by stage (:mod:`~later_django.engine.workflow_counts`), changed by the
  transactions that move its jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgpack

from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import live_workflows_key, workflow_jobs_key, workflow_key
from later_django.core.records import pack
from later_django.engine.job_actions.one_job import cancel_many
from later_django.engine.job_actions.record_checks import FINISHED, MISSING
from later_django.engine.workflow_counts import read_counts
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import RangeAdd, Set

#: What a workflow row says it is.
KINDS = ("workflow", "batch")


@dataclass(frozen=True)
class WorkflowRow:
    """What a workflow is: its kind, an optional name, when it was enqueued, and (a
    batch's) callbacks, rule -> job id."""

    workflow_id: str
    kind: str
    name: str
    created_at_ms: int
    callbacks: dict[str, str] = field(default_factory=dict)
    #: Set by the ``workflows`` pass when it found no job live (``engine.workflow_rest``):
    #: when, the state it came to rest in, and when it is forgotten.
    finished_at_ms: int | None = None
    rest_state: str | None = None
    expires_at_ms: int | None = None


@dataclass(frozen=True)
class WorkflowState:
    """A workflow as read now: its row and its jobs per stage."""

    row: WorkflowRow
    counts: dict[str, int]

    @property
    def jobs(self) -> int:
        return sum(self.counts.values())

    @property
    def state(self) -> str:
        """:func:`state_of` its counts."""
        return state_of(self.counts)


#: A workflow's states: while a job is live, then at rest by precedence.
STATES = ("running", "failed", "cancelled", "succeeded")


def state_of(counts: dict[str, int]) -> str:
    """``running`` while a job is live; then ``failed`` when a job failed, else
    ``cancelled`` when one was cancelled, else ``succeeded``."""
    if any(counts.get(stage) for stage in stages.LIVE_STAGES):
        return "running"
    if counts.get(stages.FAILED):
        return "failed"
    if counts.get(stages.CANCELLED):
        return "cancelled"
    return "succeeded"


def encode_row(namespace: str, row: WorkflowRow) -> Set:
    """The write of ``row``."""
    body = {
        "kind": row.kind,
        "name": row.name,
        "created": row.created_at_ms,
        "callbacks": row.callbacks,
        "finished": row.finished_at_ms,
        "rest": row.rest_state,
        "expires": row.expires_at_ms,
    }
    return Set(workflow_key(namespace, row.workflow_id), pack(body))


def decode_row(workflow_id: str, raw: bytes) -> WorkflowRow:
    """The row stored as ``raw``."""
    body = msgpack.unpackb(raw, raw=False)
    return WorkflowRow(
        workflow_id,
        str(body["kind"]),
        str(body.get("name") or ""),
        int(body["created"]),
        {str(rule): str(job) for rule, job in (body.get("callbacks") or {}).items()},
        body.get("finished"),
        body.get("rest"),
        body.get("expires"),
    )


def write_row(stores: Stores, namespace: str, row: WorkflowRow) -> None:
    """Writes ``row`` of a new workflow, live (inside the transaction that enqueues it)."""
    live = RangeAdd(live_workflows_key(namespace), row.workflow_id.encode())
    stores.kv.apply([encode_row(namespace, row), live], savepoint=False)


def new_row(workflow_id: str, kind: str, name: str, callbacks: dict[str, str]) -> WorkflowRow:
    """A row for a workflow enqueued now."""
    return WorkflowRow(workflow_id, kind, name, now_ms(), dict(callbacks))


def read(stores: Stores, namespace: str, workflow_id: str) -> WorkflowState | None:
    """The workflow ``workflow_id`` with its counts (two reads), ``None`` when it has
    no row."""
    raw = stores.kv.get(workflow_key(namespace, workflow_id))
    if raw is None:
        return None
    return WorkflowState(
        decode_row(workflow_id, raw), read_counts(stores.kv, namespace, workflow_id)
    )


def job_ids(stores: Stores, namespace: str, workflow_id: str) -> list[str]:
    """Every job of ``workflow_id``, in the order they joined it (one read)."""
    key = workflow_jobs_key(namespace, workflow_id)
    return [member.decode() for member in stores.kv.range_members_many([key]).get(key, [])]


def exists(stores: Stores, namespace: str, workflow_id: str) -> bool:
    """Whether ``workflow_id`` has a row (one read of one key)."""
    return stores.kv.exist(workflow_key(namespace, workflow_id))


def cancel(using: str, namespace: str, workflow_id: str) -> dict[str, str]:
    """Cancels every job of ``workflow_id`` that has not finished, the last to join
    first (so a waiting child is cancelled before its parent's cancel could fail it
    as ``ParentFailed``): what was done per job, as ``cancel_many`` answers (running
    jobs get a cancel request). Jobs already finished, or gone, are left alone and
    not listed. Call it outside a transaction: the cancels commit in batches as they
    go (``cancel_many`` reads each batch's records under lock, once)."""
    ids = job_ids(stores_for(using), namespace, workflow_id)
    done = cancel_many(using, namespace, list(reversed(ids)))
    return {job_id: what for job_id, what in done.items() if what not in (FINISHED, MISSING)}
