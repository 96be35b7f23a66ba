"""Jobs on topic partitions: routing and sequence allocation.

A partitioned job never enters the delivery queue. Its partition row
(``later_partition_job``) holds it at its sequence; the partition's head
(``later_partition_head``) is its lowest row, whose stage mirrors the job's
stage. Workers claim heads of the partitions they lease (see
:mod:`later_django.worker.partitions`), so the jobs of one partition run one
after another in sequence order. What a transaction does to partitions is
gathered and written by :mod:`later_django.engine.partition_changes`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from later_django.conf import LaterSettings
from later_django.core.keys import RESERVED_PREFIX
from later_django.core.topics import partition_for_key
from later_django.engine.topics import register_topic, topic_partitions
from later_django.exceptions import TopicLayoutMismatch
from later_django.storage.stores import Stores

__all__ = [
    "RESERVED_PREFIX",
    "allocate_sequences",
    "check_public_topic",
    "route",
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


def route(topic: str, partition_key: str | bytes | int | None, settings: LaterSettings) -> int:
    """The partition ``partition_key`` routes to on ``topic`` (``TopicNotConfigured``
    when the topic is unknown, ``ValueError`` without a key)."""
    if partition_key is None:
        raise ValueError(f"a job on topic {topic!r} needs a partition key, got None")
    return partition_for_key(partition_key, topic_partitions(settings, topic))


def allocate_sequences(
    placements: Sequence[tuple[str, int]],
    *,
    stores: Stores,
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
    store = stores.partitions
    first = store.allocate(namespace, requests)
    missing = [request for request in requests if (request[0], request[1]) not in first]
    if missing:
        for topic in sorted({request[0] for request in missing}):
            # Creates the topic row, or raises TopicLayoutMismatch naming both counts.
            register_topic(stores, namespace, topic, topic_partitions(settings, topic))
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
