"""The overview's topics: each topic's active partitions (head, backlog, lease) and
every consumer group's lag on the retained logs.

Bounded by small tables: at most :data:`PARTITION_ROWS_READ` rows of each partition
table (heads, leases, next sequences, log ends, consumer offsets), never the jobs.
"""

from __future__ import annotations

from later_django.core.keys import RESERVED_PREFIX
from later_django.overview.figures import (
    PARTITIONS_SHOWN_PER_TOPIC,
    ConsumerLag,
    PartitionFigure,
    TopicFigure,
)
from later_django.storage.dashboard import (
    PartitionHeadRow,
    PartitionKey,
    PartitionLeaseRow,
)
from later_django.storage.ports.dashboard import DashboardPort

#: Rows read from each partition table at most (bounds the overview on huge topics).
PARTITION_ROWS_READ = 5_000


def read_topics(reads: DashboardPort, namespace: str, now: int) -> list[TopicFigure]:
    """Each topic with its active partitions (a head or an owner), at most
    :data:`PARTITIONS_SHOWN_PER_TOPIC` shown; later_django's own idle topics left out."""
    topics = reads.topics(namespace)
    if not topics:
        return []
    heads = reads.partition_heads(namespace, PARTITION_ROWS_READ)
    leases = reads.partition_leases(namespace, PARTITION_ROWS_READ)
    sequences = reads.partition_next_sequences(namespace, PARTITION_ROWS_READ)
    figures = []
    for topic, partitions in topics:
        # Active: a head (jobs waiting) or an owner (held now, or until its lease lapsed).
        active = sorted(
            {p for (t, p) in heads if t == topic}
            | {p for (t, p), lease in leases.items() if t == topic and lease.owner is not None}
        )
        if not active and topic.startswith(RESERVED_PREFIX):
            continue  # later_django's own topics are shown only while in use
        every = [
            _partition_figure(
                (topic, partition_id),
                heads.get((topic, partition_id)),
                leases.get((topic, partition_id)),
                sequences.get((topic, partition_id)),
                now,
            )
            for partition_id in active
        ]
        shown = every[:PARTITIONS_SHOWN_PER_TOPIC]
        figures.append(
            TopicFigure(
                topic=topic,
                partitions=partitions,
                shown=shown,
                not_shown=max(len(active) - len(shown), 0),
                backlog=sum(partition.backlog for partition in every),
                blocked_heads=sum(partition.blocked for partition in every),
            )
        )
    return figures


def read_consumer_lags(reads: DashboardPort, namespace: str) -> list[ConsumerLag]:
    """Every consumer group's lag on every partition it has an offset on."""
    ends = reads.log_partition_ends(namespace, PARTITION_ROWS_READ)
    offsets = reads.consumer_offsets(namespace, PARTITION_ROWS_READ)
    return [
        ConsumerLag(group, topic, partition, max(ends.get((topic, partition), 0) - offset, 0))
        for (group, topic, partition), offset in offsets.items()
    ]


def _partition_figure(
    key: PartitionKey,
    head: PartitionHeadRow | None,
    lease: PartitionLeaseRow | None,
    next_sequence: int | None,
    now: int,
) -> PartitionFigure:
    """One partition's figure: the backlog runs from the head to the newest job."""
    head_sequence = None if head is None else head.sequence
    backlog = 0
    if head_sequence is not None and next_sequence is not None:
        backlog = max(next_sequence - head_sequence, 1)
    elif head_sequence is not None:
        backlog = 1
    return PartitionFigure(
        partition_id=key[1],
        head_job_id=None if head is None else head.job_id,
        head_stage=None if head is None else head.stage,
        head_sequence=head_sequence,
        backlog=backlog,
        lease_owner=None if lease is None else lease.owner,
        lease_until_ms=None if lease is None else lease.lease_until_ms,
        epoch=None if lease is None else lease.epoch,
        lease_live=lease is not None and lease.owner is not None and lease.lease_until_ms > now,
    )
