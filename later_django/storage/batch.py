"""``WriteBatch``: one transaction's writes to several tables, written together.

The engine fills a :class:`WriteBatch` (records as ``Set`` operations, index
changes, queue acknowledgements and hand-backs, execution leases, new
messages) and hands it to :meth:`BatchWriter.write`, which writes each table
once for the whole batch, always in the same order so that concurrent workers
never wait on each other in a circle:

1. delivery rows handed back or acknowledged (``later_delivery_queue``);
2. records and schedule entries (``later_storage``, ``later_storage_range``);
3. index rows (``later_jobs_index``; triggers move ``later_stage_counts``);
4. execution leases (``later_job_execution``);
5. new delivery rows (triggers move ``later_queue_depth``), with the wake-up
   notification of listening workers.

A driver that combines statements (PostgreSQL) writes the same parts, in the
same order, as one ``WITH`` statement: one round trip, and outside a
transaction its own transaction. Otherwise (SQLite, or a batch one statement
cannot express) it is one statement per table, inside a transaction.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from later_django.core.clock import now_ms
from later_django.storage.driver import Driver, prefix_placeholders
from later_django.storage.execution import ExecutionStore
from later_django.storage.job_index import JobIndexStore
from later_django.storage.kv import KeyValueStore
from later_django.storage.queue import SqlDeliveryQueue
from later_django.storage.types import (
    Delete,
    Increment,
    JobIndexChange,
    JobIndexRemove,
    JobIndexUpsert,
    RangeClear,
    Set,
    StorageOperation,
)

#: (queue name, priority, available_at ms or None for now)
PublishGroup = tuple[str, int, int | None]

_POSITIONAL = re.compile(r"(?<!%)%s")


#: The storage operations a combined statement writes (tuple: isinstance is faster).
_COMBINABLE_OPERATIONS = (Set, Delete, RangeClear, Increment)


@dataclass
class WriteBatch:
    """Writes for jobs of ``namespace`` that commit together (see the module)."""

    namespace: str
    #: The worker whose queue leases ``acks``/``nacks`` release and whose
    #: execution leases are acquired or released.
    owner: str = ""
    acks: list[int] = field(default_factory=list)
    #: (sequence, delay ms) messages handed back.
    nacks: list[tuple[int, int]] = field(default_factory=list)
    #: Sets (records: one per key), Deletes, range operations.
    operations: list[StorageOperation] = field(default_factory=list)
    index_changes: list[JobIndexChange] = field(default_factory=list)
    lease_started_at_ms: int = 0
    #: (job id, lease until ms, attempt)
    leases_acquired: list[tuple[str, int, int]] = field(default_factory=list)
    leases_released: list[str] = field(default_factory=list)
    publishes: dict[PublishGroup, list[bytes]] = field(default_factory=lambda: defaultdict(list))

    def is_empty(self) -> bool:
        return not (
            self.acks
            or self.nacks
            or self.operations
            or self.index_changes
            or self.leases_acquired
            or self.leases_released
            or self.publishes
        )

    def combinable(self) -> bool:
        """Whether one statement can write the batch: no hand-backs, only Sets,
        Deletes, range clears and counter increments among the operations, no job
        both removed from and written to the index, and no counter incremented and
        also set or deleted (a statement may not touch a row twice)."""
        if self.nacks:
            return False
        if any(not isinstance(op, _COMBINABLE_OPERATIONS) for op in self.operations):
            return False
        removed = {c.job_id for c in self.index_changes if isinstance(c, JobIndexRemove)}
        upserted = {c.row.job_id for c in self.index_changes if isinstance(c, JobIndexUpsert)}
        if removed & upserted:
            return False
        incremented = {op.key for op in self.operations if isinstance(op, Increment)}
        if not incremented:
            return True
        return not incremented & {op.key for op in self.operations if isinstance(op, Set | Delete)}

    def publish_groups(self) -> list[tuple[PublishGroup, list[bytes]]]:
        """The messages to publish, one group per (queue, priority, available_at),
        in queue and priority order."""
        return sorted(self.publishes.items(), key=lambda item: (item[0][0], item[0][1]))


class CombinedStatement:
    """Parts gathered in order, then run as one ``WITH`` statement.

    Rules the callers keep: no row is written by two parts (PostgreSQL refuses
    ``ON CONFLICT`` touching a row twice, and the parts do not see each other's
    changes), and no part reads what another part writes. The counter triggers
    fire once per part, at the end of the statement. Each part's parameter
    names are prefixed with its position so equal names never clash.
    """

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._parts: list[str] = []
        self._params: dict[str, Any] = {}

    def add(self, sql: str, params: Mapping[str, Any] | Sequence[Any]) -> None:
        prefix = f"p{len(self._parts)}_"
        if isinstance(params, Mapping):
            self._parts.append(prefix_placeholders(sql, prefix))
            self._params.update({prefix + name: value for name, value in params.items()})
        else:
            numbered = iter(range(len(params)))
            self._parts.append(_POSITIONAL.sub(lambda _: f"%({prefix}{next(numbered)})s", sql))
            self._params.update({f"{prefix}{index}": value for index, value in enumerate(params)})

    def execute(self, tail: str = "SELECT 1", tail_params: Mapping[str, Any] | None = None) -> None:
        """Runs the parts, then ``tail`` (the statement's final ``SELECT``)."""
        if tail_params:
            self._params.update(tail_params)
        self._driver.execute(_combined_sql(tuple(self._parts), tail), self._params)


@functools.lru_cache(maxsize=256)
def _combined_sql(parts: tuple[str, ...], tail: str) -> str:
    """The ``WITH`` statement of ``parts`` then ``tail``. Cached: a process writes the
    same few shapes of batch (an enqueue, a start, a finish) over and over, and the
    same text object also spares psycopg re-encoding and re-hashing it."""
    joined = ", ".join(f"p{index} AS ({sql})" for index, sql in enumerate(parts))
    return f"WITH {joined} {tail}" if joined else tail


@dataclass(frozen=True)
class BatchStores:
    """The stores a batch writes to, on one driver."""

    driver: Driver
    kv: KeyValueStore
    index: JobIndexStore
    executions: ExecutionStore
    queue: SqlDeliveryQueue


class BatchWriter:
    """Writes :class:`WriteBatch` values on the stores of one alias."""

    def __init__(self, stores: BatchStores) -> None:
        self._stores = stores
        self._driver = stores.driver

    def needs_transaction(self, batch: WriteBatch) -> bool:
        """Whether ``batch`` takes more than one statement (so :meth:`write` must run
        inside a transaction to be atomic)."""
        return not (self._driver.combines_statements and batch.combinable())

    def write(self, batch: WriteBatch) -> None:
        """Writes ``batch``, joining the caller's transaction when there is one.

        One statement when :meth:`needs_transaction` is false (atomic by itself);
        otherwise one per table, which the caller must run inside
        ``transaction.atomic``. Listeners are woken (at commit) when the batch
        publishes messages.
        """
        if batch.is_empty():
            return
        if self.needs_transaction(batch):
            self._write_per_table(batch)
        else:
            self._write_combined(batch)

    def _write_combined(self, batch: WriteBatch) -> None:
        """Everything as one statement, in the table order of the module docstring."""
        stores, namespace = self._stores, batch.namespace
        statement = CombinedStatement(self._driver)
        if batch.acks:
            statement.add(*stores.queue.ack_part(batch.owner, batch.acks))
        sets = [op for op in batch.operations if isinstance(op, Set)]
        if sets:
            statement.add(*stores.kv.set_many_part(sets, now_ms()))
        deletes = [op.key for op in batch.operations if isinstance(op, Delete)]
        if deletes:
            statement.add(*stores.kv.delete_many_part(deletes))
        increments = [op for op in batch.operations if isinstance(op, Increment)]
        if increments:
            statement.add(*stores.kv.increment_many_part(increments, now_ms()))
        cleared = [op.key for op in batch.operations if isinstance(op, RangeClear)]
        if cleared:
            statement.add(*stores.kv.range_clear_many_part(cleared))
        removed = [c.job_id for c in batch.index_changes if isinstance(c, JobIndexRemove)]
        upserted = [c.row for c in batch.index_changes if isinstance(c, JobIndexUpsert)]
        for part in (
            stores.index.job_index_remove_part(namespace, removed),
            stores.index.job_index_upsert_part(namespace, upserted),
        ):
            if part is not None:
                statement.add(*part)
        if batch.leases_acquired:
            statement.add(
                *stores.executions.lease_acquire_part(
                    namespace, batch.owner, batch.lease_started_at_ms, batch.leases_acquired
                )
            )
        if batch.leases_released:
            statement.add(
                *stores.executions.lease_release_part(namespace, batch.owner, batch.leases_released)
            )
        for (queue_name, priority, available_at), payloads in batch.publish_groups():
            statement.add(
                *stores.queue.publish_part(namespace, queue_name, payloads, priority, available_at)
            )
        if batch.publishes and self._driver.wants_wake_notification():
            statement.execute(*stores.queue.wake_tail(namespace))
        else:
            statement.execute()

    def _write_per_table(self, batch: WriteBatch) -> None:
        """One statement per table, in the table order; call inside a transaction."""
        stores, namespace = self._stores, batch.namespace
        if batch.acks:
            stores.queue.ack(batch.owner, sorted(batch.acks))
        for sequence, delay_ms in batch.nacks:
            stores.queue.nack(batch.owner, [sequence], delay_ms)
        if batch.operations:
            stores.kv.apply(_grouped(batch.operations), savepoint=False)
        if batch.index_changes:
            stores.index.apply_index_changes(namespace, batch.index_changes)
        if batch.leases_acquired:
            stores.executions.lease_acquire_many(
                namespace, batch.owner, batch.lease_started_at_ms, batch.leases_acquired
            )
        if batch.leases_released:
            stores.executions.lease_release_many(namespace, batch.owner, batch.leases_released)
        for (queue_name, priority, available_at), payloads in batch.publish_groups():
            wake = self._driver.wants_wake_notification()
            stores.queue.publish(
                namespace,
                queue_name,
                payloads,
                priority,
                available_at,
                notify=namespace if wake else None,
            )


def _grouped(operations: list[StorageOperation]) -> list[StorageOperation]:
    """Sets first (in key order), then Deletes, then the rest in their order: runs
    of Sets and of Deletes are one statement each (callers never Set and Delete
    one key)."""
    sets = sorted((op for op in operations if isinstance(op, Set)), key=lambda op: op.key)
    deletes = [op for op in operations if isinstance(op, Delete)]
    rest = [op for op in operations if not isinstance(op, Set | Delete)]
    return [*sets, *deletes, *rest]
