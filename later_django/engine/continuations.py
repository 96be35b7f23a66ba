"""Continuations: the children waiting for a job move when it finishes.

A child registered with ``continue_with`` waits in its parent's children range
(``<ns>-children-<parent id>``). The transaction that finishes the parent
moves its children: ready when the parent succeeded (or when the child runs on
any finish), failed with ``parent <id> failed`` when it runs only on success
and the parent failed, and so on down the children of children. A fan-in child (``api.after``) is in
each of its parents' ranges, marked; it moves only when the last of them finishes,
or at once on an unsuccessful parent (:mod:`later_django.engine.fan_in`).
"""

from __future__ import annotations

from django.db import transaction

from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import children_key, member_child
from later_django.core.records import JobRecord
from later_django.engine import fan_in, moves, parent_holds
from later_django.engine.record_reads import read_records
from later_django.engine.writes import JobWrites, commit, write_tables
from later_django.storage.stores import Stores
from later_django.storage.types import RangeClear


def commit_releasing_children(writes: JobWrites, stores: Stores, settings: LaterSettings) -> None:
    """:func:`~later_django.engine.writes.commit` in one transaction (joining the
    caller's) that also moves the continuations of every job ``writes`` finishes:
    the parents' records are written first, then their children read and moved."""
    with transaction.atomic(using=stores.using, savepoint=False):
        parents = write_tables(writes, stores)
        release_children(writes, parents, stores, settings)
        commit(writes, stores)


def children_ranges(written: list[JobRecord], namespace: str) -> list[str]:
    """The children ranges :func:`release_children` reads first for ``written``: those of
    its finished jobs."""
    return [
        children_key(namespace, record.job_id)
        for record in written
        if record.stage in stages.FINISHED
    ]


def release_children(
    writes: JobWrites,
    written: list[JobRecord],
    stores: Stores,
    settings: LaterSettings,
    *,
    members: dict[str, list[bytes]] | None = None,
) -> None:
    """Moves the continuations of every finished job in ``written``, adding to ``writes``.

    Runs inside the finishing transaction after the parents' records were
    written, so a ``continue_with`` racing with the finish either committed
    its child first (and the child is seen here) or waits for this commit and
    then sees a finished parent. A child of a failed parent that runs only on
    success fails too, and so, in turn, do its own such children. The finished
    children among them all let their parents go (:func:`parent_holds.release`).

    ``members``: the live members of :func:`children_ranges` of ``written``, when
    the caller read them already in a statement begun after the parents' records
    were written (the partition fence's); else they are read here.
    """
    now = now_ms()
    parents = [record for record in written if record.stage in stages.FINISHED]
    finished = list(parents)
    seen: set[str] = set()
    # Children moved by an earlier round: their records are not written until the
    # commit, so a later round would read them still waiting and move them again.
    moved: set[str] = set()
    while parents:
        parents = [parent for parent in parents if parent.job_id not in seen]
        seen.update(parent.job_id for parent in parents)
        keys = [children_key(writes.namespace, parent.job_id) for parent in parents]
        left: dict[str, int] | None = None
        if members is None:
            ranges, left = fan_in.read_children(stores, writes.namespace, keys)
        else:
            ranges = {key: members[key] for key in keys if key in members}
            members = None
        if not ranges:
            break
        parents = _move_children(
            writes,
            dict(zip(keys, parents, strict=True)),
            ranges,
            stores,
            now,
            settings,
            moved,
            left,
        )
        finished += parents
    # The finished children let their parents' records go (no statement without one).
    parent_holds.release(writes, finished, stores)


def _move_children(
    writes: JobWrites,
    parent_of_range: dict[str, JobRecord],
    ranges: dict[str, list[bytes]],
    stores: Stores,
    now: int,
    settings: LaterSettings,
    moved: set[str],
    left: dict[str, int] | None,
) -> list[JobRecord]:
    """Moves the children named in ``ranges`` (the children ranges of finished
    parents, by range key), emptying the ranges; returns the children it failed,
    whose own children move next. ``moved``: the children this transaction moved
    already (left as they are), to which it adds those it moves. ``left``: the
    fan-in children's pending counts as the read of ``ranges`` left them, when that
    read decremented them and emptied the ranges (:func:`fan_in.read_children`).

    Otherwise fan-in children first drop their pending counts (:func:`fan_in.decrement`,
    whose statement empties the ranges too); then one read locks the records of the
    ``continue_with`` children and of the fan-in children this transaction moves.
    Locked: a cancel of a waiting child (engine.cancellation) holds its row, and is
    then seen here, rather than overwritten."""
    parent_of_child: dict[str, JobRecord] = {}
    fan_in_parents: dict[str, list[JobRecord]] = {}
    for key, range_members in ranges.items():
        for member in range_members:
            child_id, all_of = member_child(member)
            if all_of:
                fan_in_parents.setdefault(child_id, []).append(parent_of_range[key])
            else:
                parent_of_child[child_id] = parent_of_range[key]
    if left is not None:
        resolutions = fan_in.resolve(writes.namespace, fan_in_parents, left)
    elif fan_in_parents:
        # The ranges are emptied by the decrement itself (its statement, on PostgreSQL).
        resolutions = fan_in.decrement(stores, writes.namespace, fan_in_parents, list(ranges))
    else:
        resolutions = {}
        for key in sorted(ranges):
            writes.add(RangeClear(key))
    parent_of_child = {c: p for c, p in parent_of_child.items() if c not in moved}
    resolutions = {c: r for c, r in resolutions.items() if c not in moved}
    to_read = sorted({*parent_of_child, *resolutions})
    if not to_read:
        return []
    moved.update(to_read)
    children = read_records(stores.kv, writes.namespace, to_read, for_update=True)
    newly_finished: list[JobRecord] = []
    for child_id, parent in sorted(parent_of_child.items()):
        child = children.get(child_id)
        if child is None or child.stage != stages.WAITING:
            continue
        if parent.stage in stages.UNSUCCESSFUL and child.run_on == "success":
            moves.fail_waiting(
                writes, child, now, f"parent {parent.job_id} {parent.stage}", settings
            )
            newly_finished.append(child)
        else:
            moves.make_ready(writes, child, now)
    newly_finished += fan_in.settle(writes, resolutions, children, now, settings)
    return newly_finished
