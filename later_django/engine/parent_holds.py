"""Retention never sweeps a parent whose children have not run.

Each parent with children (``continue_with`` or ``api.after``) has one counter-only
row, ``<ns>-job-<parent>-dependents`` (:func:`~later_django.core.keys.dependents_key`):
how many of its children have not finished.

* :func:`hold`, at a child's enqueue (its transaction), adds one to the counter of
  each of its parents, unless the child failed at once (it will never run).
* :func:`release`, in every transaction that finishes jobs (after their records were
  written; ``engine.continuations`` and the partition finish call it), subtracts the
  finished children from their parents' counters in one statement and deletes the
  counters that reach 0. Jobs without parents cost nothing here: no statement.
* The sweep (``later_jobs_index``'s, which deletes finished records with their index
  rows) skips a job whose counter exists, whatever its expiry; once the counter is
  gone the next sweep deletes the parent, if its retention has passed.

A parent past its retention and held this way reads as absent everywhere (the admin,
``after``), except to its children (``engine.parent_results``). A held parent's
retention is not extended: it is swept at the first sweep after its last child
finished, or at its own expiry if that is later.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from later_django.core import stages
from later_django.core.keys import dependents_key
from later_django.core.records import JobRecord
from later_django.engine.parent_results import parent_ids_of
from later_django.engine.writes import JobWrites
from later_django.storage.stores import Stores
from later_django.storage.types import Delete, Increment


def hold(writes: JobWrites, record: JobRecord) -> None:
    """A new child ``record`` keeps its parents: one more on each parent's counter,
    written with the enqueue. Nothing for a child already finished (failed at once)."""
    if record.stage in stages.FINISHED:
        return
    for parent_id in parent_ids_of(record):
        writes.add(Increment(dependents_key(record.namespace, parent_id)))


def release(writes: JobWrites, finished: Iterable[JobRecord], stores: Stores) -> None:
    """The children among ``finished`` (records just written in a final stage, this
    transaction) let their parents go: one statement subtracts them from their
    parents' counters (locking the rows until the commit, on PostgreSQL), and the
    counters left at 0 or below are deleted with the transaction's writes. A counter
    that is gone already (a child finishing again after an operator's retry, or an
    enqueue older than this counter) is left alone."""
    children = {
        record.job_id: record
        for record in finished
        if record.parent_job_id is not None or record.parent_job_ids
    }
    if not children:
        return
    amounts: Counter[str] = Counter()
    # Once per child, even when a transaction wrote it twice (a diamond's child failed
    # by two of its parents in one finish).
    for record in children.values():
        for parent_id in parent_ids_of(record):
            amounts[dependents_key(record.namespace, parent_id)] += 1
    left = stores.kv.decrement_counters(dict(amounts))
    for key in sorted(left):
        if left[key] <= 0:
            writes.add(Delete(key))
