"""Jobs on topic partitions: sequence allocation and the head bookkeeping of a batch.

A partitioned job never enters the delivery queue. Its partition row
(``later_partition_job``) holds it at its sequence; the partition's head
(``later_partition_head``) is its lowest row, whose stage mirrors the job's
stage. Workers claim heads of the partitions they lease (see
:mod:`later_django.worker.partitions`), so the jobs of one partition run one
after another in sequence order.

Every engine write that moves a partitioned job records its effect on the
partitions in the :class:`~later_django.engine.writes.JobWrites` (rows
entering, rows leaving, a retry's new time, heads to recompute), and
:func:`write_partition_changes` writes them last in the same transaction:

1. new rows and, where a partition has no head, the new head (an existing head
   is neither changed nor locked);
2. in one statement: rows leaving, retry times, and the recomputed heads
   (lowest remaining row, stage from the index), or their removal.

These come last in every transaction, after the records and index rows (whose
triggers move the stage counters): enqueue, start and finish all take counter
rows before head rows, and an enqueue never locks a head a worker may wait
for, so they never wait for each other in a circle. The one race this leaves
(an enqueue that saw a head just before the finishing worker, not yet seeing
the new row, dropped it) is repaired by the partition's holder within about
a second (:meth:`~later_django.storage.partitions.PartitionStore.materialize_heads`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from later_django.conf import LaterSettings
from later_django.core.keys import RESERVED_PREFIX
from later_django.core.topics import partition_for_key
from later_django.engine.topics import (
    TopicLayoutMismatch,
    TopicNotConfigured,
    register_topic,
    topic_partitions,
)
from later_django.storage.stores import stores_for

if TYPE_CHECKING:
    from later_django.engine.enqueue import NewJob
    from later_django.engine.writes import JobWrites

__all__ = [
    "RESERVED_PREFIX",
    "TopicLayoutMismatch",
    "TopicNotConfigured",
    "allocate_sequences",
    "check_public_topic",
    "route",
    "write_partition_changes",
]


def check_public_topic(topic: str, settings: LaterSettings) -> int:
    """The partition count of a topic callers may enqueue to; raises
    ``TopicNotConfigured`` for an unknown topic and ``ValueError`` for a reserved one."""
    if not isinstance(topic, str) or topic.startswith(RESERVED_PREFIX):
        raise ValueError(
            f"topic {topic!r} is reserved for later_django's own use (names starting with "
            f"{RESERVED_PREFIX!r}); enqueue to a topic of LATER['TOPICS']"
        )
    return topic_partitions(settings, topic)


def route(job: NewJob, settings: LaterSettings) -> int:
    """The partition of ``job`` on its topic (``TopicNotConfigured`` when unknown)."""
    assert job.topic is not None
    if job.partition_key is None:
        raise ValueError(f"a job on topic {job.topic!r} needs a partition key, got None")
    return partition_for_key(job.partition_key, topic_partitions(settings, job.topic))


def allocate_sequences(
    placements: Sequence[tuple[str, int]],
    *,
    using: str,
    namespace: str,
    settings: LaterSettings,
) -> list[int]:
    """The sequences of jobs placed on ``placements`` (``(topic, partition_id)`` per
    job, in order): consecutive per partition, in the order given. One statement
    validates each topic's stored partition count and allocates; a topic not yet
    recorded is registered (``TopicLayoutMismatch`` when another count is stored)
    and the statement retried once. Call inside the enqueue's transaction."""
    if not placements:
        return []
    counts = Counter(placements)
    requests = [
        (topic, pid, count, topic_partitions(settings, topic))
        for (topic, pid), count in sorted(counts.items())
    ]
    store = stores_for(using).partitions
    first = store.allocate(namespace, requests)
    missing = [request for request in requests if (request[0], request[1]) not in first]
    if missing:
        for topic in sorted({request[0] for request in missing}):
            # Creates the topic row, or raises TopicLayoutMismatch naming both counts.
            register_topic(using, namespace, topic, topic_partitions(settings, topic))
        first.update(store.allocate(namespace, missing))
        still = [request for request in missing if (request[0], request[1]) not in first]
        if still:
            topic, pid, _, partitions = still[0]
            raise TopicLayoutMismatch(
                f"could not allocate a sequence on topic {topic!r} partition {pid}: "
                f"the topic is not recorded with {partitions} partitions (LATER['TOPICS'])"
            )
    next_of = dict(first)
    sequences = []
    for placement in placements:
        sequences.append(next_of[placement])
        next_of[placement] += 1
    return sequences


def write_partition_changes(writes: JobWrites, using: str) -> None:
    """Writes the partition changes gathered in ``writes`` (inside the transaction
    that wrote the records and index rows) and forgets them; new heads wake the
    listening workers once per transaction."""
    stores = stores_for(using)
    store = stores.partitions
    namespace = writes.namespace
    entries, exits, run_at = (
        writes.partition_entries,
        writes.partition_exits,
        writes.partition_run_at,
    )
    touched = writes.partitions_touched
    take_partition_changes(writes)
    if entries:
        wake = namespace if stores.driver.wants_wake_notification() else None
        store.enter(namespace, entries, notify=wake)
    if touched or exits or run_at:
        store.advance(namespace, touched, exits=exits, run_at=run_at)


def take_partition_changes(writes: JobWrites) -> JobWrites:
    """Moves the partition changes out of ``writes`` into a new ``JobWrites`` of the
    same namespace (to be written later in the same transaction)."""
    from later_django.engine.writes import JobWrites

    taken = JobWrites(writes.namespace)
    taken.partition_entries, writes.partition_entries = writes.partition_entries, []
    taken.partition_exits, writes.partition_exits = writes.partition_exits, []
    taken.partition_run_at, writes.partition_run_at = writes.partition_run_at, {}
    taken.partitions_touched, writes.partitions_touched = writes.partitions_touched, set()
    return taken


def merge_partition_changes(into: JobWrites, source: JobWrites) -> None:
    """Adds ``source``'s partition changes to ``into``."""
    into.partition_entries += source.partition_entries
    into.partition_exits += source.partition_exits
    into.partition_run_at.update(source.partition_run_at)
    into.partitions_touched |= source.partitions_touched
