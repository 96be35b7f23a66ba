"""The lease port: the one owner + epoch fenced lease, on one lease table.

``LeasePort``: see its docstring for the contracts, the package docstring
(:mod:`later_django.storage.ports`) for those every port shares, and
:mod:`later_django.storage.leases` for the row and the fence its ``renew`` is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from later_django.storage.leases import Lease, Slot


@runtime_checkable
class LeasePort(Protocol):
    """The one owner + epoch fenced lease, on one lease table. Implemented by
    :class:`~later_django.storage.leases.LeaseStore`."""

    def leases(self, scope: Sequence[Any]) -> dict[Slot, Lease]:
        """Every lease row of ``scope`` (lapsed and free ones included), by slot."""

    def take(
        self,
        scope: Sequence[Any],
        owner: Any,
        slots: Iterable[Slot],
        *,
        until_ms: int,
        now_ms: int,
        renew_own: bool = False,
    ) -> dict[Slot, int]:
        """Takes each of ``slots`` that is absent, free or lapsed at ``now_ms`` until
        ``until_ms`` (with ``renew_own`` also extends ``owner``'s own live ones, epoch kept);
        returns slot -> epoch of those now held (slot order, one write transaction)."""

    def renew(
        self,
        scope: Sequence[Any],
        owner: Any,
        held: Mapping[Slot, int],
        *,
        until_ms: int,
        now_ms: int = 0,
    ) -> set[Slot]:
        """Extends to ``until_ms`` each lease of ``held`` (slot -> epoch) that ``owner`` still
        holds at that epoch; returns those slots (the fence: see the module docstring).
        ``now_ms``: the write time of tables that record one."""

    def release(
        self,
        scope: Sequence[Any],
        owner: Any,
        slots: Iterable[Slot] | None = None,
        *,
        now_ms: int = 0,
    ) -> None:
        """Gives up ``owner``'s leases on ``slots`` (every one of the scope when None)."""

    def ensure(self, scope: Sequence[Any], slots: Sequence[Any]) -> None:
        """Creates free rows (epoch 0) for ``slots`` (one-column slot values) where missing."""

    def hold(
        self, scope: Sequence[Any], owner: Any, wanted: Sequence[Any], *, until_ms: int, now_ms: int
    ) -> dict[Any, int]:
        """In one statement: ``owner`` releases its leases outside ``wanted`` (one-column slot
        values), renews its own in it and takes those free or lapsed at ``now_ms`` (epoch + 1
        when the owner changes). Returns slot value -> epoch of what ``owner`` now holds."""
