"""The lease of a maintenance pass: one fenced lease per pass and namespace.

The key is ``<namespace>-pass-<name>`` of ``later_storage``
(:data:`~later_django.storage.queries.leases.PASS_LEASES`), the value the
holder's owner id, the counter its epoch. Every call is one statement of
:class:`~later_django.storage.leases.LeaseStore` in its own transaction (or
the caller's).
"""

from __future__ import annotations

from dataclasses import dataclass

from later_django.storage.leases import LeaseStore
from later_django.storage.queries.leases import PASS_LEASES
from later_django.storage.stores import stores_for


@dataclass(frozen=True)
class PassLeases:
    """The maintenance-pass leases of one database alias."""

    store: LeaseStore

    def take(self, key: str, owner: str, *, until_ms: int, now_ms: int) -> int | None:
        """Takes ``key`` for ``owner`` until ``until_ms`` when it is absent, released or
        lapsed at ``now_ms`` (of concurrent takers exactly one wins); returns the
        lease's epoch, or ``None`` when someone holds it."""
        taken = self.store.take((), owner.encode(), [(key,)], until_ms=until_ms, now_ms=now_ms)
        return taken.get((key,))

    def renew(self, key: str, owner: str, epoch: int, *, until_ms: int, now_ms: int) -> bool:
        """Moves the lease's end to ``until_ms``, only while it still holds ``owner`` and
        ``epoch``; ``False`` when it does not (it lapsed and another process took it)."""
        kept = self.store.renew(
            (), owner.encode(), {(key,): epoch}, until_ms=until_ms, now_ms=now_ms
        )
        return bool(kept)

    def release(self, key: str, owner: str, *, now_ms: int) -> None:
        """Gives ``key`` back when ``owner`` holds it (the next taker may take it at once)."""
        self.store.release((), owner.encode(), [(key,)], now_ms=now_ms)


def pass_leases(using: str) -> PassLeases:
    """The maintenance-pass leases of the database alias ``using``."""
    return PassLeases(LeaseStore(stores_for(using).driver, PASS_LEASES))
