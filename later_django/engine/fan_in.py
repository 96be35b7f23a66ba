"""Fan-in: a child that waits for every one of several parents (``api.after``).

The edges are those of ``continue_with``: the child is a member of each unfinished
parent's children range (``core.keys.fan_in_member``, marked so that a finish tells
it from a ``continue_with`` child without reading it). Beside them one counter-only
row, ``<ns>-job-<child>-pending``, holds how many parents have not finished.

* At the enqueue (:func:`place`), in the enqueue's transaction, the parents'
  records are read under row locks: parents already finished count as resolved,
  so the child is written waiting with the count of the others, or ready, or
  failed at once.
* At a parent's finish (:func:`decrement`, then :func:`settle`), inside the
  finishing transaction after the parent's record was written, the counters of
  its fan-in children drop by one (one statement for all of them, rows locked in
  key order until the commit). The transaction whose decrement leaves 0 makes the
  child ready; one whose parent failed or was cancelled fails a child that runs
  only on success at once. Either deletes the counter, so a later decrement finds
  no row and does nothing: the child moves exactly once.

The child's record is read (and locked) only by the transaction that moves it;
the other finishes touch the counter row alone, for the instant between their
decrement and their commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from later_django.compat.tasks import TaskResult
from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.keys import (
    FAN_IN_MARK,
    children_key,
    dependents_key,
    fan_in_member,
    pending_parents_key,
)
from later_django.core.records import JobRecord
from later_django.engine import moves
from later_django.engine.record_reads import read_records
from later_django.engine.writes import JobWrites, commit
from later_django.storage.stores import Stores
from later_django.storage.types import Delete, Increment, RangeAdd


def parent_ids(parents: Iterable[str | TaskResult]) -> tuple[str, ...]:
    """The distinct parent ids of ``after(parents, ...)`` (ids or ``TaskResult``
    values), in first-seen order. ``ValueError`` naming the rule when there is none;
    ``TypeError`` for one id or result given alone (a string would be read as a
    list of one-character ids)."""
    if isinstance(parents, str | TaskResult):
        raise TypeError(f"after() takes a list of parent jobs, got one: {parents!r}")
    distinct = tuple(dict.fromkeys(p.id if isinstance(p, TaskResult) else str(p) for p in parents))
    if not distinct:
        raise ValueError("after() needs at least one parent job: parents is empty")
    return distinct


def culprit_of(
    parent_ids: Sequence[str], parents: Mapping[str, JobRecord], run_on: str | None
) -> JobRecord | None:
    """The first of ``parent_ids`` that failed or was cancelled when the child runs
    only on success (``run_on`` ``success``); None otherwise."""
    if run_on != "success":
        return None
    for parent_id in parent_ids:
        if parents[parent_id].stage in stages.UNSUCCESSFUL:
            return parents[parent_id]
    return None


def place(
    writes: JobWrites,
    record: JobRecord,
    parents: Mapping[str, JobRecord],
    now: int,
    settings: LaterSettings,
) -> None:
    """A new fan-in child's moves, its parents (``record.parent_job_ids``) read under
    row locks in this transaction: failed at once naming the first unsuccessful
    parent (``run_on`` ``success``), ready at once when every parent has finished,
    else waiting, registered with each unfinished parent and counting them."""
    ids = record.parent_job_ids or []
    culprit = culprit_of(ids, parents, record.run_on)
    if culprit is not None:
        reason = f"parent {culprit.job_id} {culprit.stage}"
        moves.fail_waiting(writes, record, now, reason, settings)
        return
    unfinished = [parent_id for parent_id in ids if parents[parent_id].stage not in stages.FINISHED]
    if not unfinished:
        moves.make_ready(writes, record, now)
        return
    moves.place_new(writes, record, now)
    member = fan_in_member(record.job_id)
    for parent_id in unfinished:
        writes.add(RangeAdd(children_key(record.namespace, parent_id), member))
    writes.add(Increment(pending_parents_key(record.namespace, record.job_id), len(unfinished)))


@dataclass(frozen=True)
class Resolution:
    """What a finishing transaction decided for one fan-in child: the parents it has
    left to wait for (0: ready) and the unsuccessful parent among those finishing
    now (None: none)."""

    left: int
    culprit: JobRecord | None


def decrement(
    stores: Stores,
    namespace: str,
    finishing: Mapping[str, Sequence[JobRecord]],
    ranges: Sequence[str] = (),
) -> dict[str, Resolution]:
    """Drops the pending count of each fan-in child in ``finishing`` (child id -> its
    parents finishing in this transaction) by the number of those parents, in one
    statement (rows locked in key order until the commit) that also empties the
    finishing parents' children ``ranges``. Returns the children
    this transaction must move: those it brought to 0 and those with an
    unsuccessful parent among ``finishing``. A child whose counter is gone (moved
    already: failed at once by another parent) is left out."""
    keys = {child_id: pending_parents_key(namespace, child_id) for child_id in finishing}
    left = stores.kv.decrement_counters(
        {keys[child_id]: len(parents) for child_id, parents in finishing.items()},
        clear_ranges=ranges,
    )
    return resolve(namespace, finishing, left)


def read_children(
    stores: Stores, namespace: str, ranges: Sequence[str]
) -> tuple[dict[str, list[bytes]], dict[str, int]]:
    """The members of finishing parents' children ``ranges``, read and emptied, with
    every fan-in child's pending count dropped by the number of those parents it
    waits for (:func:`decrement`'s work, in the same statement on PostgreSQL: a
    finish with fan-in children pays no round trip more than one without). The
    counters as left, by counter key, for :func:`resolve`."""
    prefix, suffix = pending_parents_key(namespace, "\x00").split("\x00")
    return stores.kv.read_ranges_decrementing(ranges, FAN_IN_MARK, prefix, suffix)


def resolve(
    namespace: str, finishing: Mapping[str, Sequence[JobRecord]], left: Mapping[str, int]
) -> dict[str, Resolution]:
    """The fan-in children of ``finishing`` (child id -> its parents finishing now)
    this transaction must move, from their pending counts as its decrement ``left``
    them (by counter key): those at 0, and those with an unsuccessful parent among
    ``finishing``. A child whose counter is gone is left out."""
    keys = {child_id: pending_parents_key(namespace, child_id) for child_id in finishing}
    resolutions: dict[str, Resolution] = {}
    for child_id, parents in finishing.items():
        count = left.get(keys[child_id])
        if count is None:
            continue
        culprit = next((p for p in parents if p.stage in stages.UNSUCCESSFUL), None)
        if count <= 0 or culprit is not None:
            resolutions[child_id] = Resolution(count, culprit)
    return resolutions


def settle(
    writes: JobWrites,
    resolutions: Mapping[str, Resolution],
    children: Mapping[str, JobRecord],
    now: int,
    settings: LaterSettings,
) -> list[JobRecord]:
    """Moves the fan-in children of ``resolutions`` (their records in ``children``,
    read under row locks after :func:`decrement`) and returns those it failed,
    whose own children move next. A child no longer waiting (cancelled, deleted)
    is left as it is; its counter goes once its last parent has finished. A child
    that runs on any finish with parents still unfinished keeps waiting."""
    failed: list[JobRecord] = []
    for child_id, resolution in sorted(resolutions.items()):
        child = children.get(child_id)
        culprit = resolution.culprit
        fails = culprit is not None and child is not None and child.run_on == "success"
        if resolution.left > 0 and not fails:
            continue
        writes.add(Delete(pending_parents_key(writes.namespace, child_id)))
        if child is None or child.stage != stages.WAITING:
            continue
        if fails and culprit is not None:
            reason = f"parent {culprit.job_id} {culprit.stage}"
            moves.fail_waiting(writes, child, now, reason, settings)
            failed.append(child)
        else:
            moves.make_ready(writes, child, now)
    return failed


def add_parent(stores: Stores, namespace: str, waiting: Sequence[str], parent_id: str) -> list[str]:
    """Makes the job ``parent_id`` (enqueued in the caller's transaction, not finished) one
    more parent of each fan-in child in ``waiting`` that still waits: an edge in its
    children range, the child's pending count up by one, and its id appended to the
    child's ``parent_job_ids``, and the parent held for it (``engine.parent_holds``).
    Returns the children it was added to. Call it inside
    ``atomic()``, while another parent of each child is known unfinished (so no count
    can reach 0 meanwhile): the children's records are locked until the commit."""
    children = read_records(stores.kv, namespace, sorted(waiting), for_update=True)
    writes = JobWrites(namespace)
    added: list[str] = []
    for child_id, child in sorted(children.items()):
        if child.stage != stages.WAITING or child.parent_job_ids is None:
            continue
        child.parent_job_ids.append(parent_id)
        writes.save(child)
        writes.add(RangeAdd(children_key(namespace, parent_id), fan_in_member(child_id)))
        writes.add(Increment(pending_parents_key(namespace, child_id), 1))
        # The child holds its new parent, as its enqueue held the others (parent_holds).
        writes.add(Increment(dependents_key(namespace, parent_id), 1))
        added.append(child_id)
    if added:
        commit(writes, stores)
    return added
