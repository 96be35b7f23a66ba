"""The open batch of this thread or task (``later_django.batches.batch``): the jobs
enqueued while it is open become its members.

:func:`note` is on every enqueue's path (``LaterBackend``): one context-variable read
when no batch is open.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from later_django.core.records import JobRecord

_members: ContextVar[list[str] | None] = ContextVar("later_django_batch", default=None)


def note(records: Sequence[JobRecord]) -> None:
    """Adds the jobs of ``records`` to the open batch, if one is open."""
    members = _members.get()
    if members is not None:
        members.extend([record.job_id for record in records])


@contextmanager
def collecting() -> Iterator[list[str]]:
    """Opens a batch for the block: yields the list the block's enqueues fill (in
    enqueue order; a unique job's duplicate adds the job it folded into). Batches do
    not nest: ``RuntimeError`` when one is open already."""
    if _members.get() is not None:
        raise RuntimeError("a batch is already open here: batches do not nest")
    members: list[str] = []
    token = _members.set(members)
    try:
        yield members
    finally:
        _members.reset(token)
