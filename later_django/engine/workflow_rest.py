"""Workflows at rest: noticed, counted by state, and forgotten after their retention.

A workflow is live from its enqueue: its id is a member of ``<ns>-flows-live``
(written with its row). The ``workflows`` maintenance pass walks that range, oldest
first, and settles each workflow whose counts show no live job (:func:`settle`):
in one transaction, under its row's lock, the row gets when it came to rest, its
state and when it expires; the counter of workflows at rest in that state
(``<ns>-flows-<state>``) gains one; an expiry entry is written; the id leaves the
live range. Past its expiry (the longest retention of a finished job after it came
to rest) :func:`forget` deletes the row, its jobs range and its counts, and the
counter loses it again. ``retry_workflow`` wakes a workflow at rest (:func:`wake`)
in its own transaction, under the same row lock.

So workflows by state (:func:`count_by_state`) is three counters and the live
range's size: bounded reads, whatever the number of workflows. A workflow that came
to rest is counted ``running`` until the pass has seen it (its interval).
"""

from __future__ import annotations

from dataclasses import replace

from django.db import transaction

from later_django.core import stages
from later_django.core.keys import (
    live_workflows_key,
    workflow_count_key,
    workflow_expiry_bounds,
    workflow_expiry_key,
    workflow_jobs_key,
    workflow_key,
    workflows_at_rest_bounds,
    workflows_at_rest_key,
)
from later_django.engine.workflow_counts import SHARDS, read_counts
from later_django.engine.workflows import STATES, decode_row, encode_row, state_of
from later_django.storage.ports.kv import KeyValuePort
from later_django.storage.stores import Stores
from later_django.storage.types import (
    Delete,
    Increment,
    RangeAdd,
    RangeClear,
    RangeRemove,
    Set,
    StorageOperation,
)


def settle(stores: Stores, namespace: str, now: int, keep_ms: int, limit: int) -> int:
    """Settles the workflows at rest among the ``limit`` oldest live ones (see the
    module), each in its own transaction; returns how many came to rest. A live id
    whose row is gone leaves the range."""
    live = live_workflows_key(namespace)
    page = stores.kv.range_page(live, limit=limit)
    settled = 0
    for item in page.items:
        workflow_id = item.value.decode()
        if state_of(read_counts(stores.kv, namespace, workflow_id)) == "running":
            continue
        with transaction.atomic(using=stores.using):
            key = workflow_key(namespace, workflow_id)
            raw = stores.kv.get_many_for_update([key]).get(key)
            operations: list[StorageOperation] = [RangeRemove(live, item.value)]
            if raw is not None:
                state = state_of(read_counts(stores.kv, namespace, workflow_id))
                if state == "running":
                    continue
                row = decode_row(workflow_id, raw)
                expires = now + keep_ms
                rested = replace(row, finished_at_ms=now, rest_state=state, expires_at_ms=expires)
                operations += [
                    encode_row(namespace, rested),
                    Set(workflow_expiry_key(namespace, expires, workflow_id), state.encode()),
                    Increment(workflows_at_rest_key(namespace, state)),
                ]
                settled += 1
            stores.kv.apply(operations, savepoint=False)
    return settled


def forget(stores: Stores, namespace: str, now: int, limit: int) -> int:
    """Deletes up to ``limit`` workflows past their expiry: row, jobs range, counts,
    expiry entry; one transaction. Returns how many."""
    keys = stores.kv.key_scan(*workflow_expiry_bounds(namespace, now), limit)
    if not keys:
        return 0
    operations: list[StorageOperation] = []
    with transaction.atomic(using=stores.using):
        rows = stores.kv.get_many_for_update(
            [workflow_key(namespace, key.rsplit("-", 1)[1]) for key in keys]
        )
        for key in keys:
            workflow_id = key.rsplit("-", 1)[1]
            raw = rows.get(workflow_key(namespace, workflow_id))
            operations.append(Delete(key))
            if raw is None:
                continue
            row = decode_row(workflow_id, raw)
            operations += [
                Delete(workflow_key(namespace, workflow_id)),
                *[
                    Delete(workflow_count_key(namespace, workflow_id, stage, shard))
                    for stage in stages.ALL_STAGES
                    for shard in range(SHARDS)
                ],
                RangeClear(workflow_jobs_key(namespace, workflow_id)),
            ]
            if row.rest_state is not None:
                operations.append(Increment(workflows_at_rest_key(namespace, row.rest_state), -1))
        stores.kv.apply(operations, savepoint=False)
    return len(keys)


def wake(kv: KeyValuePort, namespace: str, workflow_id: str) -> list[StorageOperation]:
    """The writes that make a workflow at rest live again (a retry), its row read under
    a lock (call inside the retry's transaction, before its jobs are read): none when
    it is live already, or has no row."""
    key = workflow_key(namespace, workflow_id)
    raw = kv.get_many_for_update([key]).get(key)
    if raw is None:
        return []
    row = decode_row(workflow_id, raw)
    if row.rest_state is None:
        return []
    operations: list[StorageOperation] = [
        encode_row(
            namespace, replace(row, finished_at_ms=None, rest_state=None, expires_at_ms=None)
        ),
        RangeAdd(live_workflows_key(namespace), workflow_id.encode()),
        Increment(workflows_at_rest_key(namespace, row.rest_state), -1),
    ]
    if row.expires_at_ms is not None:
        operations.append(Delete(workflow_expiry_key(namespace, row.expires_at_ms, workflow_id)))
    return operations


def count_by_state(kv: KeyValuePort, namespace: str) -> dict[str, int]:
    """Workflows per state (:data:`~later_django.engine.workflows.STATES`): the live
    range's size and the counters of those at rest (two reads)."""
    counts = dict.fromkeys(STATES, 0)
    counts["running"] = kv.range_count(live_workflows_key(namespace))
    for key, value in kv.counter_scan(*workflows_at_rest_bounds(namespace), len(STATES)):
        state = key.rsplit("-", 1)[1]
        if state in counts:
            counts[state] = max(value, 0)
    return counts
