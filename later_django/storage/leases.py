"""``LeaseStore``: the one owner+epoch fenced lease, on any lease table.

Partition leases (``later_partition_lease``), consumer-group leases of retained
logs (``later_log_consumer_lease``) and maintenance-pass leases (the
``<ns>-pass-<name>`` row of ``later_storage``) are one mechanism with one API;
only the table differs (:mod:`later_django.storage.queries.leases`, whose
statements come from one template with the table's fixed names).

Contracts:

* :meth:`LeaseStore.take` - a slot that is absent, free or lapsed becomes the
  owner's (epoch + 1 on a change of owner, 1 for a new row); a live lease of
  anyone, the taker included, is left alone (``renew_own``: the taker's own
  are extended, epoch kept - a holder refreshing everything it wants at
  once). Of concurrent takers exactly one gets a slot (one upsert per slot).
* :meth:`LeaseStore.renew` - extends a lease only while owner *and* epoch still
  match; the slots it returns are the caller's fence: their rows stay locked
  until the caller's transaction ends, so no takeover commits in between.
* :meth:`LeaseStore.release` - gives leases back (the epoch is kept; the next
  taker raises it).
* :meth:`LeaseStore.hold` (one-column slots) - one statement that releases the
  owner's leases outside ``wanted``, renews its own in it and takes the free or
  lapsed ones, so concurrent holders lock rows in one order.

A ``scope`` is the tuple of the table's scope columns' values (``(namespace,)``,
``(namespace, group, topic)``, or ``()``); a slot is the tuple of its slot
columns' values. Every call joins the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from later_django.storage.driver import Driver, Params, Row
from later_django.storage.queries.leases import LeaseQueries, LeaseStatements, LeaseTable

Slot = tuple[Any, ...]


@dataclass(frozen=True)
class Lease:
    """One lease row as read: ``owner`` None when free."""

    slot: Slot
    owner: Any
    until_ms: int
    epoch: int


class LeaseStore:
    """The leases of ``table`` on ``driver``'s database."""

    def __init__(self, driver: Driver, table: LeaseTable) -> None:
        self._driver = driver
        self.table = table
        self._queries = driver.queries(LeaseQueries)

    # Read at first use, not at construction: a driver without lease statements yet
    # (MySQL, issue 36) still builds every store; after the first use these are plain
    # instance attributes.
    @cached_property
    def _binds_lists(self) -> bool:
        return self._queries.binds_slot_lists

    @cached_property
    def _q(self) -> LeaseStatements:
        return self._queries.of(self.table)

    def _scope(self, scope: Sequence[Any]) -> dict[str, Any]:
        if len(scope) != len(self.table.scope):
            raise ValueError(
                f"a lease scope of {self.table.name} is {self.table.scope}, got {tuple(scope)!r}"
            )
        return dict(zip(self.table.scope, scope, strict=True))

    def _slot(self, row: Row) -> Slot:
        return tuple(row[: len(self.table.slots)])

    def _each(
        self,
        sql: str,
        params: Params,
        slots: Sequence[Slot],
        extra: Sequence[str] = (),
        *,
        returning: bool = True,
    ) -> list[Row]:
        """Runs ``sql`` for ``slots`` (tuples of the slot columns then ``extra``): one
        statement binding every slot as lists, or one statement per slot."""
        columns = [*self.table.slot_columns, *extra]
        if self._binds_lists:
            bound = [{column: [slot[i] for slot in slots] for i, column in enumerate(columns)}]
        else:
            bound = [dict(zip(columns, slot, strict=True)) for slot in slots]
        rows: list[Row] = []
        for values in bound:
            if returning:
                rows += self._driver.fetch_all(sql, {**params, **values})
            else:
                self._driver.execute(sql, {**params, **values})
        return rows

    def leases(self, scope: Sequence[Any]) -> dict[Slot, Lease]:
        """Every lease row of ``scope`` (lapsed and free ones included), by slot."""
        rows = self._driver.fetch_all(self._q.state, self._scope(scope))
        return {
            self._slot(row): Lease(self._slot(row), *row[len(self.table.slots) :]) for row in rows
        }

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
        ``until_ms`` (with ``renew_own`` also extends ``owner``'s own live ones, epoch
        kept); returns slot -> epoch of those now held (slot order, one write
        transaction)."""
        wanted = sorted(set(slots))
        if not wanted:
            return {}
        params = {**self._scope(scope), "owner": owner, "until": until_ms, "now": now_ms}
        with self._driver.write_transaction():
            rows = self._each(self._q.take_or_renew if renew_own else self._q.take, params, wanted)
        return {self._slot(row): int(row[-1]) for row in rows}

    def renew(
        self,
        scope: Sequence[Any],
        owner: Any,
        held: Mapping[Slot, int],
        *,
        until_ms: int,
        now_ms: int = 0,
    ) -> set[Slot]:
        """Extends to ``until_ms`` each lease of ``held`` (slot -> epoch) that ``owner``
        still holds at that epoch; returns those slots (the fence: see the module
        docstring). ``now_ms``: the write time of tables that record one."""
        wanted = sorted((*slot, epoch) for slot, epoch in held.items())
        if not wanted:
            return set()
        params = {**self._scope(scope), "owner": owner, "until": until_ms, "now": now_ms}
        if self._binds_lists:
            rows = self._each(self._q.renew, params, wanted, extra=["epoch"])
        else:
            # One statement either way: here the (slot..., epoch) rows as one list.
            slots = self._driver.list_param(wanted)
            rows = self._driver.fetch_all(self._q.renew, {**params, "slots": slots})
        return {self._slot(row) for row in rows}

    def release(
        self,
        scope: Sequence[Any],
        owner: Any,
        slots: Iterable[Slot] | None = None,
        *,
        now_ms: int = 0,
    ) -> None:
        """Gives up ``owner``'s leases on ``slots`` (every one of the scope when None)."""
        params = {**self._scope(scope), "owner": owner, "now": now_ms}
        if slots is None:
            self._driver.execute(self._q.release_all, params)
            return
        wanted = sorted(set(slots))
        if not wanted:
            return
        with self._driver.write_transaction():
            self._each(self._q.release, params, wanted, returning=False)

    def ensure(self, scope: Sequence[Any], slots: Sequence[Any]) -> None:
        """Creates free rows (epoch 0) for ``slots`` (one-column slot values) where missing."""
        self._driver.execute(
            self._q.ensure, {**self._scope(scope), "slots": self._driver.list_param(list(slots))}
        )

    def hold(
        self, scope: Sequence[Any], owner: Any, wanted: Sequence[Any], *, until_ms: int, now_ms: int
    ) -> dict[Any, int]:
        """In one statement: ``owner`` releases its leases outside ``wanted`` (one-column
        slot values), renews its own in it and takes those free or lapsed at
        ``now_ms`` (epoch + 1 when the owner changes). Returns slot value -> epoch of
        what ``owner`` now holds."""
        rows = self._driver.fetch_all(
            self._q.hold,
            {
                **self._scope(scope),
                "owner": owner,
                "until": until_ms,
                "now": now_ms,
                "slots": self._driver.list_param(sorted(wanted)),
            },
        )
        return {slot: int(epoch) for slot, holder, epoch in rows if holder == owner}
