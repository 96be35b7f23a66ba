"""Statements of the one fenced lease, produced from one template per lease table.

A lease is a row ``(scope..., slot..., owner, until, epoch)``: ``scope`` fixes a
group of leases (a namespace; a consumer group on a topic), ``slot`` names one
lease in it (a topic partition; a log partition; a pass's key). Every table gets
the same statements from :func:`lease_statements`; the table and column names
come from the :class:`LeaseTable` constants below, never from values, and every
value is a named parameter:

* ``take``: absent, free (owner NULL) or lapsed (``until < %(now)s``) slots
  become ``%(owner)s``'s until ``%(until)s``; the epoch rises by one when the
  owner changes (an absent row starts at 1). Returns ``(slot..., epoch)``.
* ``take_or_renew``: ``take`` that also extends the taker's own live leases
  (epoch kept), for holders that refresh all they want in one statement.
* ``renew``: extends ``%(until)s`` only where owner *and* epoch still match, for
  every slot in one statement (PostgreSQL: arrays; SQLite: ``%(slots)s``, a JSON
  array of ``[slot..., epoch]``); returns the slots kept. Its row lock holds the lease until the
  transaction ends: run first in a transaction that must stay fenced.
* ``release``/``release_all``: owner NULL, until 0 (the epoch is kept; the next
  taker raises it).
* :func:`held_at_epoch` (a predicate, not a statement): ``still mine at this
  epoch``, for a store's statement that reads and locks the lease row itself
  (the log's ``offset_commit``), composed where that statement is defined.
* ``ensure``/``hold`` (tables with one slot column): free rows at epoch 0 where
  missing; one statement that makes the owner's holding exactly the listed
  slots it can have (its own renewed, free or lapsed ones taken, the rest of
  its own released), so concurrent holders lock rows in one order.

The vendor query classes (``storage/{postgres,sqlite}/queries/leases.py``) give
how a list of slots binds: PostgreSQL one array per slot column (``unnest``),
SQLite one statement per slot inside one write transaction (``renew``: one JSON
array).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LeaseTable:
    """The fixed names of one lease table (constants, never values)."""

    name: str
    scope: tuple[str, ...]
    #: (column, PostgreSQL type) of the columns naming one lease in its scope.
    slots: tuple[tuple[str, str], ...]
    owner: str = "owner"
    until: str = "lease_until"
    epoch: str = "epoch"
    #: Columns set to ``%(now)s`` when a row is created / written.
    created: tuple[str, ...] = ()
    touched: tuple[str, ...] = ()

    @property
    def slot_columns(self) -> tuple[str, ...]:
        return tuple(column for column, _ in self.slots)

    @property
    def key_columns(self) -> str:
        return ", ".join((*self.scope, *self.slot_columns))


#: Partition leases of topic-partitioned jobs (one per namespace, topic, partition).
PARTITION_LEASES = LeaseTable(
    "later_partition_lease", ("namespace",), (("topic", "varchar"), ("partition_id", "int"))
)
#: Consumer-group leases of a retained log (rows created free when a group joins).
CONSUMER_LEASES = LeaseTable(
    "later_log_consumer_lease", ("namespace", "group_name", "topic"), (("partition_id", "int"),)
)
#: Maintenance-pass leases: the ``later_storage`` row of ``<ns>-pass-<name>``, its
#: value the owner id, its expiry the lease's end and its counter the epoch, so a
#: released or lapsed lease reads as an absent key and the sweep removes it.
PASS_LEASES = LeaseTable(
    "later_storage",
    (),
    (("key", "varchar"),),
    owner="value",
    until="date_expire",
    epoch="counter_value",
    created=("date_created",),
    touched=("date_updated",),
)


def _equal(columns: tuple[str, ...], alias: str = "", source: str = "") -> list[str]:
    """``alias.c = %(c)s`` (or ``= source.c``) for each of ``columns``."""
    prefix = f"{alias}." if alias else ""
    return [
        f"{prefix}{column} = {source + '.' + column if source else f'%({column})s'}"
        for column in columns
    ]


@dataclass(frozen=True)
class LeaseStatements:
    """The lease statements of one table for one vendor."""

    state: str
    take: str
    take_or_renew: str
    renew: str
    release: str
    release_all: str
    ensure: str = ""
    hold: str = ""


def conflict_take(table: LeaseTable, *, renew_own: bool = False) -> str:
    """The ``ON CONFLICT`` tail of ``take``: only free or lapsed rows change hands
    (with ``renew_own``, also the taker's own rows, whatever their epoch)."""
    t = table.name
    own = f"{t}.{table.owner} = excluded.{table.owner} OR " if renew_own else ""
    sets = [
        f"{table.owner} = excluded.{table.owner}",
        f"{table.until} = excluded.{table.until}",
        f"{table.epoch} = CASE WHEN {t}.{table.owner} = excluded.{table.owner} "
        f"THEN {t}.{table.epoch} ELSE COALESCE({t}.{table.epoch}, 0) + 1 END",
        *(f"{column} = %(now)s" for column in table.touched),
    ]
    return (
        f" ON CONFLICT ({table.key_columns}) DO UPDATE SET {', '.join(sets)} "
        f"WHERE {own}{t}.{table.owner} IS NULL OR {t}.{table.until} < %(now)s "
        f"RETURNING {', '.join(table.slot_columns)}, {table.epoch}"
    )


def insert_columns(table: LeaseTable) -> str:
    return ", ".join(
        (*table.scope, *table.slot_columns, table.owner, table.until, table.epoch, *table.created)
    )


def held_at_epoch(table: LeaseTable) -> str:
    """The fence predicate: the row of ``%(slot...)s`` in the scope is still
    ``%(owner)s``'s at ``%(epoch)s``. For a statement that reads (and, on
    PostgreSQL, locks) the lease row in the same transaction as the fenced write."""
    return " AND ".join(
        [
            *_equal(table.scope),
            *_equal(table.slot_columns),
            f"{table.owner} = %(owner)s",
            f"{table.epoch} = %(epoch)s",
        ]
    )


def shared_statements(table: LeaseTable) -> dict[str, str]:
    """The statements both vendors spell alike (the scope-wide ones)."""
    scope = _equal(table.scope)
    touch = "".join(f", {column} = %(now)s" for column in table.touched)
    slots = ", ".join(table.slot_columns)
    return {
        "state": (
            f"SELECT {slots}, {table.owner}, {table.until}, {table.epoch} FROM {table.name}"
            + (f" WHERE {' AND '.join(scope)}" if scope else "")
            + f" ORDER BY {slots}"
        ),
        "release_all": (
            f"UPDATE {table.name} SET {table.owner} = NULL, {table.until} = 0{touch} "
            f"WHERE {' AND '.join([*scope, f'{table.owner} = %(owner)s'])}"
        ),
    }


def hold_statement(table: LeaseTable, listed: str) -> str:
    """``hold`` of a table with one slot column; ``listed`` reads the bound list."""
    (slot,) = table.slot_columns
    t = table
    wanted = f"{slot} IN {listed}"
    return (
        f"UPDATE {t.name} SET "
        f"{t.owner} = CASE WHEN {wanted} THEN %(owner)s ELSE NULL END, "
        f"{t.until} = CASE WHEN {wanted} THEN %(until)s ELSE 0 END, "
        f"{t.epoch} = CASE WHEN {wanted} AND ({t.owner} IS NULL OR {t.owner} <> %(owner)s) "
        f"THEN {t.epoch} + 1 ELSE {t.epoch} END "
        f"WHERE {' AND '.join(_equal(t.scope))} AND ({t.owner} = %(owner)s OR ("
        f"{wanted} AND ({t.owner} IS NULL OR {t.until} < %(now)s))) "
        f"RETURNING {slot}, {t.owner}, {t.epoch}"
    )


def ensure_statement(table: LeaseTable, source: str, slot: str) -> str:
    """``ensure`` of a table with one slot column: free rows at epoch 0 for each
    ``slot`` read from ``source`` (the bound list), where missing."""
    scope = ", ".join(f"%({column})s" for column in table.scope)
    return (
        f"INSERT INTO {table.name} ({insert_columns(table)}) "
        f"SELECT {scope}, {slot}, NULL, 0, 0 FROM {source} ON CONFLICT DO NOTHING"
    )


class LeaseQueries:
    """The lease statements of a table on this vendor (:meth:`of`)."""

    #: Whether ``take``/``renew``/``release`` bind every slot at once (arrays);
    #: otherwise ``take``/``release`` bind one slot and run once per slot, and
    #: ``renew`` binds every slot as one JSON array.
    binds_slot_lists: bool

    def of(self, table: LeaseTable) -> LeaseStatements:
        return _statements(type(self), table)

    def build(self, table: LeaseTable) -> LeaseStatements:
        raise NotImplementedError


_BUILT: dict[tuple[type[LeaseQueries], LeaseTable], LeaseStatements] = {}


def _statements(queries: type[LeaseQueries], table: LeaseTable) -> LeaseStatements:
    """The statements of ``table`` on the vendor of ``queries``, built once (fixed
    text from fixed names: a table's statements never change after import)."""
    key = (queries, table)
    if key not in _BUILT:
        _BUILT[key] = queries().build(table)
    return _BUILT[key]
