"""What one transaction does to topic partitions, gathered and written last.

Every engine write that moves a partitioned job records its effect on the
partitions in a :class:`PartitionChanges` (rows entering, rows leaving, a
retry's new time, heads to recompute), and :meth:`PartitionChanges.write`
writes them last in the same transaction:

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

from dataclasses import dataclass, field

from later_django.storage.partitions import Partition, PartitionEntry
from later_django.storage.stores import Stores


@dataclass
class PartitionChanges:
    """Rows entering partitions, job ids leaving them, new earliest run times by
    job id, and the partitions whose head must be recomputed."""

    entries: list[PartitionEntry] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)
    run_at: dict[str, int] = field(default_factory=dict)
    touched: set[Partition] = field(default_factory=set)

    def enter(self, entry: PartitionEntry) -> None:
        """A new job takes its row (and is the head of a partition that has none)."""
        self.entries.append(entry)

    def leave(self, job_id: str, partition: Partition) -> None:
        """The job's row leaves; the partition's next row becomes the head."""
        self.exits.append(job_id)
        self.touched.add(partition)

    def retry_at(self, job_id: str, partition: Partition, at_ms: int) -> None:
        """The job stays the head, blocking its partition until ``at_ms``."""
        self.run_at[job_id] = at_ms
        self.touched.add(partition)

    def touch(self, partition: Partition) -> None:
        """The head's stage changed: recompute it."""
        self.touched.add(partition)

    def is_empty(self) -> bool:
        return not (self.entries or self.exits or self.run_at or self.touched)

    def take(self) -> PartitionChanges:
        """These changes, moved out (this object is left empty), to be written later
        in the same transaction."""
        taken = PartitionChanges(self.entries, self.exits, self.run_at, self.touched)
        self.entries, self.exits, self.run_at, self.touched = [], [], {}, set()
        return taken

    def merge(self, other: PartitionChanges) -> None:
        """Adds ``other``'s changes to these."""
        self.entries += other.entries
        self.exits += other.exits
        self.run_at.update(other.run_at)
        self.touched |= other.touched

    def write(self, stores: Stores, namespace: str) -> None:
        """Writes the changes (inside the transaction that wrote the records and index
        rows, after them) and forgets them; new heads wake the listening workers once
        per transaction."""
        if self.is_empty():  # every job without a topic: nothing to take or write
            return
        changes = self.take()
        if changes.entries:
            wake = namespace if stores.driver.wants_wake_notification() else None
            stores.partitions.enter(namespace, changes.entries, notify=wake)
        if changes.touched or changes.exits or changes.run_at:
            stores.partitions.advance(
                namespace, changes.touched, exits=changes.exits, run_at=changes.run_at
            )
