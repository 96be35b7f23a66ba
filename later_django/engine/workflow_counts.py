"""A workflow's jobs counted by stage, kept by the transactions that move them.

Each move of a job that belongs to a workflow (``JobRecord.workflow_id``) adds one to
the stage it enters and takes one from the stage it leaves
(``JobWrites.count_transition``); the transaction's moves are summed per workflow
and stage and written as ``Increment`` operations with its other writes, so the
counts change in the same transaction as the records. Each count is striped over
:data:`SHARDS` counter rows (``core.keys.workflow_count_key``), the stripe chosen by
the writing process, so two workers finishing jobs of one workflow at the same
instant update different rows and do not wait on each other; a read sums the
stripes (:func:`read_counts`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from later_django.core import stages
from later_django.core.keys import (
    stage_of_workflow_count_key,
    workflow_count_bounds,
    workflow_count_key,
)
from later_django.storage.ports.kv import KeyValuePort
from later_django.storage.types import Increment

#: Counter rows per workflow and stage.
SHARDS = 8
#: The most stripes a workflow can have: every stage's.
_MOST_STRIPES = len(stages.ALL_STAGES) * SHARDS


def increments(namespace: str, moved: Mapping[tuple[str, str], int]) -> list[Increment]:
    """The counter increments of ``moved`` ((workflow id, stage) -> jobs in less
    jobs out), in key order, leaving out what sums to 0; on this process's stripe
    (a forked worker process has its own pid, hence mostly its own stripe)."""
    shard = os.getpid() % SHARDS
    return sorted(
        (
            Increment(workflow_count_key(namespace, workflow_id, stage, shard), by)
            for (workflow_id, stage), by in moved.items()
            if by
        ),
        key=lambda increment: increment.key,
    )


def read_counts(kv: KeyValuePort, namespace: str, workflow_id: str) -> dict[str, int]:
    """``workflow_id``'s jobs per stage (stages with none left out): one walk of its
    stripes."""
    start, stop = workflow_count_bounds(namespace, workflow_id)
    counts: dict[str, int] = {}
    for key, value in kv.counter_scan(start, stop, _MOST_STRIPES):
        stage = stage_of_workflow_count_key(key)
        counts[stage] = counts.get(stage, 0) + value
    return {stage: count for stage, count in counts.items() if count}


def read_counts_many(
    kv: KeyValuePort, namespace: str, workflow_ids: Sequence[str]
) -> dict[str, dict[str, int]]:
    """The counts of each of ``workflow_ids`` (as :func:`read_counts`; a workflow with
    no count is left out) in ONE walk, from the smallest id's stripes to the largest's.
    Meant for ids contiguous in key order (a page of the workflow rows): the stripes
    of other workflows between them are read, then dropped."""
    if not workflow_ids:
        return {}
    wanted = set(workflow_ids)
    lowest = min(wanted)
    start, _ = workflow_count_bounds(namespace, lowest)
    _, stop = workflow_count_bounds(namespace, max(wanted))
    prefix = len(start) - len(lowest) - 1  # "<ns>-flown-": the id follows it
    counts: dict[str, dict[str, int]] = {}
    for key, value in kv.counter_scan(start, stop, len(wanted) * _MOST_STRIPES):
        workflow_id = key[prefix:].split("-", 1)[0]
        if workflow_id in wanted and value:
            stage = stage_of_workflow_count_key(key)
            per_stage = counts.setdefault(workflow_id, {})
            per_stage[stage] = per_stage.get(stage, 0) + value
    return {
        workflow_id: {stage: count for stage, count in per_stage.items() if count}
        for workflow_id, per_stage in counts.items()
    }
