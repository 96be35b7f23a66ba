"""SQLite lease statements: one slot per statement (the store runs them in one
``BEGIN IMMEDIATE`` transaction, where a statement costs no round trip), but
``renew``, which takes every slot as one JSON array: it runs inside a finish's
write lock, once per partition of the finish otherwise."""

from __future__ import annotations

from later_django.storage.queries.leases import (
    LeaseQueries,
    LeaseStatements,
    LeaseTable,
    conflict_take,
    ensure_statement,
    hold_statement,
    insert_columns,
    shared_statements,
)
from later_django.storage.sqlite import SqliteDriver


def _where(table: LeaseTable, *columns: str) -> str:
    return " AND ".join(f"{column} = %({column})s" for column in columns)


def _renew(table: LeaseTable, touch: str) -> str:
    """``renew`` of every slot at once: ``%(slots)s`` is a JSON array of ``[slot...,
    epoch]``. The rows are found from the list (``CROSS JOIN`` keeps it the outer
    loop), each by one probe of the table's key, whatever the table's statistics."""
    t = table.name
    columns = (*table.slot_columns, table.epoch)
    matched = " AND ".join(
        [
            *(f"l.{column} = %({column})s" for column in table.scope),
            *(
                f"l.{column} = json_extract(b.value, '$[{index}]')"
                for index, column in enumerate(columns)
            ),
            f"l.{table.owner} = %(owner)s",
        ]
    )
    return (
        f"UPDATE {t} SET {table.until} = %(until)s{touch} WHERE rowid IN ("
        f"SELECT l.rowid FROM json_each(%(slots)s) AS b CROSS JOIN {t} AS l WHERE {matched}) "
        f"RETURNING {', '.join(table.slot_columns)}"
    )


@SqliteDriver.register
class SqliteLeaseQueries(LeaseQueries):
    binds_slot_lists = False

    def build(self, table: LeaseTable) -> LeaseStatements:
        values = [
            *(f"%({column})s" for column in (*table.scope, *table.slot_columns)),
            "%(owner)s",
            "%(until)s",
            "1",
            *("%(now)s" for _ in table.created),
        ]
        touch = "".join(f", {column} = %(now)s" for column in table.touched)
        single = len(table.slots) == 1 and bool(table.scope)
        insert = f"INSERT INTO {table.name} ({insert_columns(table)}) VALUES ({', '.join(values)})"
        return LeaseStatements(
            **shared_statements(table),
            take=insert + conflict_take(table),
            take_or_renew=insert + conflict_take(table, renew_own=True),
            renew=_renew(table, touch),
            release=(
                f"UPDATE {table.name} SET {table.owner} = NULL, {table.until} = 0{touch} WHERE "
                + _where(table, *table.scope)
                + (" AND " if table.scope else "")
                + f"{table.owner} = %(owner)s AND "
                + _where(table, *table.slot_columns)
            ),
            ensure=(
                ensure_statement(table, "json_each(%(slots)s) WHERE true", "value")
                if single
                else ""
            ),
            hold=hold_statement(table, "(SELECT value FROM json_each(%(slots)s))")
            if single
            else "",
        )
