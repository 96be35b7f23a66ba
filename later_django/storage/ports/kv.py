"""The key-value port: values with expiry and ordered ranges.

``KeyValuePort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from later_django.storage.types import RangeOrder, RangePage, StorageOperation


@runtime_checkable
class KeyValuePort(Protocol):
    """Values with expiry and ordered ranges (``later_storage``, ``later_storage_range``).
    Implemented by :class:`~later_django.storage.kv.KeyValueStore`."""

    def get(self, key: str) -> bytes | None:
        """The unexpired value of ``key``, or ``None`` when absent, expired, or a counter-only
        row (one that ``Increment`` created and no ``Set`` gave a value)."""

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The unexpired values of ``keys`` in one statement; absent, expired and counter-only
        keys are left out."""

    def get_many_unswept(self, keys: Sequence[str]) -> dict[str, bytes]:
        """``get_many`` that also returns values past their expiry the sweep has not
        deleted yet, in one statement."""

    def get_many_for_update(self, keys: Sequence[str]) -> dict[str, bytes]:
        """``get_many`` that also locks the rows until the transaction ends (PostgreSQL ``FOR
        UPDATE``, in key order; on SQLite the transaction already holds the database's write
        lock). Call it inside ``atomic()``."""

    def set(self, key: str, value: bytes) -> None:
        """Sets a value and clears any previous expiry."""

    def delete(self, key: str) -> None:
        """Deletes a value; deleting an absent key succeeds."""

    def exist(self, key: str) -> bool:
        """Whether an unexpired value exists."""

    def expire(self, key: str, ttl_seconds: float) -> None:
        """Sets a time-to-live on an existing value; an absent key is not created."""

    def apply(self, operations: Sequence[StorageOperation], *, savepoint: bool = True) -> None:
        """Applies ``operations`` in order, atomically: all become visible, or none do."""

    def range_page(
        self,
        key: str,
        cursor: int | None = None,
        limit: int = 100,
        order: RangeOrder = RangeOrder.OLDEST_FIRST,
    ) -> RangePage:
        """At most ``limit`` unexpired members of range ``key`` in ``order``."""

    def range_members_many(self, keys: Sequence[str]) -> dict[str, list[bytes]]:
        """The unexpired members of each range in ``keys``, oldest first, in one statement;
        ranges with no live member are left out."""

    def key_scan(self, start: str, stop: str, limit: int) -> list[str]:
        """Up to ``limit`` live keys ``k`` with ``start <= k < stop``, in byte order."""

    def key_scan_reverse(self, start: str, stop: str, limit: int) -> list[str]:
        """:meth:`key_scan` from the other end: up to ``limit`` live keys ``k`` with
        ``start <= k < stop``, in descending byte order (the largest first), one walk
        of the primary key backwards."""

    def counter_scan(self, start: str, stop: str, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` live counter rows ``(key, counter_value)`` with ``start <= key
        < stop``, in byte order: one walk of the primary key."""

    def range_count(self, key: str) -> int:
        """The number of unexpired members of range ``key``: a plain read that never takes the
        write lock (expired members are left to the sweep)."""

    def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl_seconds: float | None = None
    ) -> bool:
        """Replaces the live value of ``key`` by ``value`` only while it is ``expected``, in
        one statement; ``True`` if this call replaced it (of concurrent callers expecting
        the same value, exactly one). An absent or expired key is left absent."""

    def read_ranges_decrementing(
        self, keys: Sequence[str], mark: bytes, prefix: str, suffix: str
    ) -> tuple[dict[str, list[bytes]], dict[str, int]]:
        """The live members of the ranges ``keys``, those ranges emptied, and the
        counters ``prefix + <rest> + suffix`` of the members starting with ``mark``
        lowered by the number of ranges naming each, as left (one statement where the
        driver can). Inside ``atomic()``: the counters stay locked until it ends."""

    def decrement_counters(
        self, amounts: Mapping[str, int], *, clear_ranges: Sequence[str] = ()
    ) -> dict[str, int]:
        """Subtracts ``amounts[key]`` from the counter of each existing counter row in
        ``amounts`` and returns the counters as left (absent keys and rows without a
        counter are left out and not created); also empties the ranges
        ``clear_ranges``. One statement per distinct amount (PostgreSQL clears the
        ranges in the first). PostgreSQL locks the counter rows in key order until the
        transaction ends, so concurrent callers serialise per row and each sees the
        value its own decrement left. Call it inside ``atomic()``."""

    def set_if_absent(self, key: str, value: bytes, ttl_seconds: float | None = None) -> bool:
        """Creates ``key`` with ``value`` only if it has no unexpired value; ``True`` if this
        call created it (an existing live value is left untouched)."""
