"""How ``KeyValueStore.apply`` folds runs of like operations into one statement each.

A run of consecutive ``Set`` operations becomes a :class:`SetRun`, of ``Delete``
operations a :class:`DeleteRun`, of two or more ``RangeAdd`` operations a
:class:`RangeAddRun`, of two or more ``Increment`` operations an
:class:`IncrementRun`; the effect is that of applying the operations in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby

from later_django.storage.types import Delete, Increment, RangeAdd, Set, StorageOperation


@dataclass(frozen=True)
class SetRun:
    """Consecutive ``Set`` operations, the last one per key, in key order."""

    sets: list[Set]


@dataclass(frozen=True)
class DeleteRun:
    """The distinct keys of consecutive ``Delete`` operations, in key order."""

    keys: list[str]


@dataclass(frozen=True)
class RangeAddRun:
    """Two or more consecutive ``RangeAdd`` operations, the last one per member, in
    their order (a fan-in child's edges: one member in each parent's range)."""

    adds: list[RangeAdd]


@dataclass(frozen=True)
class IncrementRun:
    """Two or more consecutive ``Increment`` operations as rows ``{"key", "by"}``, one
    per key (its amounts summed), in key order (a child's holds on its parents, with a
    fan-in child's pending count)."""

    rows: list[dict[str, object]]


def batch_runs(
    operations: Sequence[StorageOperation],
) -> Iterator[StorageOperation | SetRun | DeleteRun | RangeAddRun | IncrementRun]:
    """``operations`` with each run of consecutive ``Set`` (or ``Delete``, or two or
    more ``RangeAdd``) operations folded into one :class:`SetRun` (:class:`DeleteRun`,
    :class:`RangeAddRun`).

    Within a run only the last ``Set`` of a key matters (it replaces the whole
    entry), and keys are sorted so concurrent writers lock rows in one order.
    """
    for kind, run in groupby(operations, key=type):
        if kind is Set:
            last_per_key = {op.key: op for op in run if isinstance(op, Set)}
            yield SetRun([last_per_key[key] for key in sorted(last_per_key)])
        elif kind is Delete:
            yield DeleteRun(sorted({operation.key for operation in run}))
        elif kind is RangeAdd:
            last = {(op.key, op.value): op for op in run if isinstance(op, RangeAdd)}
            adds = list(last.values())
            yield RangeAddRun(adds) if len(adds) > 1 else adds[0]
        elif kind is Increment:
            increments = [op for op in run if isinstance(op, Increment)]
            if len(increments) == 1:
                yield increments[0]
                continue
            amounts: dict[str, int] = {}
            for op in increments:
                amounts[op.key] = amounts.get(op.key, 0) + op.by
            yield IncrementRun([{"key": key, "by": amounts[key]} for key in sorted(amounts)])
        else:
            yield from run
