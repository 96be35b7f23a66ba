"""The open workflow of this thread or task: the jobs enqueued while it is open join
it (their records carry its id) and, for a batch (``later_django.batches.batch``),
become its members.

:func:`note` and :func:`workflow_id` are on every enqueue's path (``LaterBackend``,
``engine.enqueue``): one context-variable read when no workflow is open.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from later_django.core.records import JobRecord


@dataclass
class Scope:
    """An open workflow: its id, and the batch's member list (None: not a batch)."""

    workflow_id: str
    members: list[str] | None


_scope: ContextVar[Scope | None] = ContextVar("later_django_workflow", default=None)


def note(records: Sequence[JobRecord]) -> None:
    """Adds the jobs of ``records`` to the open batch, if one is open."""
    scope = _scope.get()
    if scope is not None and scope.members is not None:
        scope.members.extend([record.job_id for record in records])


def workflow_id() -> str | None:
    """The id of the workflow open here, if any: the jobs enqueued now join it."""
    scope = _scope.get()
    return None if scope is None else scope.workflow_id


@contextmanager
def collecting(workflow_id: str) -> Iterator[list[str]]:
    """Opens the batch ``workflow_id`` for the block: yields the list the block's
    enqueues fill (in enqueue order; a unique job's duplicate adds the job it folded
    into). Batches do not nest, nor open inside a workflow: ``RuntimeError`` when a
    workflow is open already."""
    if _scope.get() is not None:
        raise RuntimeError("a batch or workflow is already open here: batches do not nest")
    members: list[str] = []
    token = _scope.set(Scope(workflow_id, members))
    try:
        yield members
    finally:
        _scope.reset(token)


@contextmanager
def joining(workflow_id: str) -> Iterator[str]:
    """The block's enqueues join ``workflow_id``, unless a workflow is open already
    (a ``Workflow`` enqueued inside a batch joins the batch): yields the id they join."""
    scope = _scope.get()
    if scope is not None:
        yield scope.workflow_id
        return
    token = _scope.set(Scope(workflow_id, None))
    try:
        yield workflow_id
    finally:
        _scope.reset(token)
