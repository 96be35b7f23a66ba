"""MySQL/MariaDB lease statements: one slot per ``take``/``release`` statement (the
store runs them in one transaction, in slot order), ``renew`` of every slot at once
through ``JSON_TABLE``, and a write then a read where the other vendors use
``RETURNING`` (:class:`~later_django.storage.driver.Returning`).

Every column is backquoted (``later_storage``'s ``key`` is a reserved word). A take is
one ``INSERT ... ON DUPLICATE KEY UPDATE`` that leaves its outcome in
``LAST_INSERT_ID()``: the inserted row sets it to 1, and the conflict update's first
assignment sets it to whether the row changes hands (1) or stays (0), once, for the
assignments after it (which run left to right, each seeing the columns already
assigned: the epoch, which reads the old owner, goes before the owner). The read
then returns the row's slot and epoch only when the flag is 1: exactly the row
``RETURNING`` gives on the other vendors, and nothing when the take lost. The
conflict row stays locked by the upsert until the transaction ends, so the read
sees what this take wrote.
"""

from __future__ import annotations

from later_django.storage.driver import Returning
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.leases import LeaseQueries, LeaseStatements, LeaseTable

#: JSON_TABLE column types of the slot columns' (PostgreSQL) types: strings compare
#: byte by byte, as the ``utf8mb4_bin`` key columns do.
_JSON_TYPES = {"varchar": "VARCHAR(500) COLLATE utf8mb4_bin", "int": "BIGINT"}


def _q(column: str) -> str:
    return f"`{column}`"


def _equal(columns: tuple[str, ...], alias: str = "") -> list[str]:
    """``alias.`c` = %(c)s`` for each of ``columns``."""
    prefix = f"{alias}." if alias else ""
    return [f"{prefix}{_q(column)} = %({column})s" for column in columns]


def _where(*conditions: list[str] | str) -> str:
    parts = [c for group in conditions for c in ([group] if isinstance(group, str) else group)]
    return " AND ".join(parts) if parts else "TRUE"


def _slots_table(table: LeaseTable, *, epoch: bool) -> str:
    """``%(slots)s`` (a JSON array of ``[slot..., epoch]``, or of one-column slot values)
    as the rows of ``b``: ``b.s0``, ``b.s1``... and ``b.e``."""
    if epoch:
        columns = [
            f"s{at} {_JSON_TYPES[kind]} PATH '$[{at}]'" for at, (_, kind) in enumerate(table.slots)
        ]
        columns.append(f"e BIGINT PATH '$[{len(table.slots)}]'")
    else:
        ((_, kind),) = table.slots
        columns = [f"s0 {_JSON_TYPES[kind]} PATH '$'"]
    return f"JSON_TABLE(%(slots)s, '$[*]' COLUMNS ({', '.join(columns)})) AS b"


def _take(table: LeaseTable, *, renew_own: bool) -> Returning:
    t = table.name
    owner, until, epoch = (f"{t}.{_q(c)}" for c in (table.owner, table.until, table.epoch))
    values = [
        *(f"%({column})s" for column in (*table.scope, *table.slot_columns)),
        "%(owner)s",
        "%(until)s",
        "LAST_INSERT_ID(1)",
        *("%(now)s" for _ in table.created),
    ]
    columns = ", ".join(
        _q(c)
        for c in (
            *table.scope,
            *table.slot_columns,
            table.owner,
            table.until,
            table.epoch,
            *table.created,
        )
    )
    own = f"{owner} = %(owner)s OR " if renew_own else ""
    # NULL (a row without an end: not a lease's) counts as held, as PostgreSQL's
    # ``WHERE`` would not update it.
    changes = f"COALESCE({own}{owner} IS NULL OR {until} < %(now)s, FALSE)"
    sets = [
        f"{_q(table.epoch)} = IF(LAST_INSERT_ID({changes}), "
        f"IF({owner} <=> %(owner)s, {epoch}, COALESCE({epoch}, 0) + 1), {epoch})",
        f"{_q(table.until)} = IF(LAST_INSERT_ID(), %(until)s, {until})",
        *(f"{_q(c)} = IF(LAST_INSERT_ID(), %(now)s, {t}.{_q(c)})" for c in table.touched),
        f"{_q(table.owner)} = IF(LAST_INSERT_ID(), %(owner)s, {owner})",
    ]
    write = (
        f"INSERT INTO {t} ({columns}) VALUES ({', '.join(values)}) "
        f"ON DUPLICATE KEY UPDATE {', '.join(sets)}"
    )
    slots = ", ".join(_q(c) for c in table.slot_columns)
    read = (
        f"SELECT {slots}, {_q(table.epoch)} FROM {t} "
        f"WHERE {_where(_equal(table.scope), _equal(table.slot_columns))} "
        "AND LAST_INSERT_ID() = 1"
    )
    return Returning([write], read)


def _renew(table: LeaseTable, touch: str) -> Returning:
    """Every slot of ``%(slots)s`` (``[slot..., epoch]``) extended where the owner and
    the epoch still match, then those rows read back: they are locked by the update
    until the transaction ends, and no other writer makes a row this owner's at an
    old epoch. ``JSON_TABLE`` drives the join, one primary-key probe per slot, pinned:
    on a small table the planner scanned the lease rows instead, and a multi-table
    UPDATE waits on every row it reads (another owner's slot taken in a transaction
    still open)."""
    matched = _where(
        _equal(table.scope, "l"),
        [f"l.{_q(column)} = b.s{at}" for at, column in enumerate(table.slot_columns)],
        f"l.{_q(table.owner)} = %(owner)s",
        f"l.{_q(table.epoch)} = b.e",
    )
    joined = (
        f"{_slots_table(table, epoch=True)} STRAIGHT_JOIN {table.name} AS l "
        f"FORCE INDEX (PRIMARY) ON {matched}"
    )
    slots = ", ".join(f"l.{_q(c)}" for c in table.slot_columns)
    return Returning(
        [f"UPDATE {joined} SET l.{_q(table.until)} = %(until)s{touch}"],
        f"SELECT {slots} FROM {joined} ORDER BY {slots}",
    )


def _hold(table: LeaseTable) -> Returning:
    """The owner's holding made exactly the listed slots (see ``hold_statement``),
    then what it holds now read back. A single-table ``UPDATE`` assigns left to
    right, each assignment seeing the ones before: the epoch reads the old owner, so
    it goes first and the owner last."""
    (slot,) = table.slot_columns
    s, owner, until, epoch = (_q(c) for c in (slot, table.owner, table.until, table.epoch))
    wanted = f"{s} IN (SELECT b.s0 FROM {_slots_table(table, epoch=False)})"
    scope = _where(_equal(table.scope))
    return Returning(
        [
            f"UPDATE {table.name} SET "
            f"{epoch} = IF({wanted} AND ({owner} IS NULL OR {owner} <> %(owner)s), "
            f"{epoch} + 1, {epoch}), "
            f"{until} = IF({wanted}, %(until)s, 0), "
            f"{owner} = IF({wanted}, %(owner)s, NULL) "
            f"WHERE {scope} AND ({owner} = %(owner)s OR ("
            f"{wanted} AND ({owner} IS NULL OR {until} < %(now)s)))"
        ],
        f"SELECT {s}, {owner}, {epoch} FROM {table.name} "
        f"WHERE {scope} AND {owner} = %(owner)s ORDER BY {s}",
    )


def _ensure(table: LeaseTable) -> str:
    """Free rows at epoch 0 for the listed slots that lack one (the conflict update
    changes nothing)."""
    (slot,) = table.slot_columns
    columns = ", ".join(
        _q(c) for c in (*table.scope, slot, table.owner, table.until, table.epoch, *table.created)
    )
    scope = ", ".join(f"%({column})s" for column in table.scope)
    return (
        f"INSERT INTO {table.name} ({columns}) "
        f"SELECT {scope}, b.s0, NULL, 0, 0 FROM {_slots_table(table, epoch=False)} "
        f"ON DUPLICATE KEY UPDATE {_q(slot)} = {table.name}.{_q(slot)}"
    )


@MysqlDriver.register
class MysqlLeaseQueries(LeaseQueries):
    binds_slot_lists = False

    def build(self, table: LeaseTable) -> LeaseStatements:
        t = table.name
        touch = "".join(f", {_q(column)} = %(now)s" for column in table.touched)
        renew_touch = "".join(f", l.{_q(column)} = %(now)s" for column in table.touched)
        single = len(table.slots) == 1 and bool(table.scope)
        slots = ", ".join(_q(c) for c in table.slot_columns)
        release = f"UPDATE {t} SET {_q(table.owner)} = NULL, {_q(table.until)} = 0{touch} WHERE "
        return LeaseStatements(
            state=(
                f"SELECT {slots}, {_q(table.owner)}, {_q(table.until)}, {_q(table.epoch)} "
                f"FROM {t} WHERE {_where(_equal(table.scope))} ORDER BY {slots}"
            ),
            take=_take(table, renew_own=False),
            take_or_renew=_take(table, renew_own=True),
            renew=_renew(table, renew_touch),
            release=release
            + _where(
                _equal(table.scope),
                f"{_q(table.owner)} = %(owner)s",
                _equal(table.slot_columns),
            ),
            release_all=release + _where(_equal(table.scope), f"{_q(table.owner)} = %(owner)s"),
            ensure=_ensure(table) if single else "",
            hold=_hold(table) if single else "",
        )
