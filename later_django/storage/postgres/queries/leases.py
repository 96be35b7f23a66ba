"""PostgreSQL lease statements: a list of slots binds as one array per slot column."""

from __future__ import annotations

from later_django.storage.postgres import PostgresDriver
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


def _unnest(table: LeaseTable, *extra: tuple[str, str]) -> str:
    columns = (*table.slots, *extra)
    arrays = ", ".join(f"%({column})s::{kind}[]" for column, kind in columns)
    return f"unnest({arrays}) AS b({', '.join(column for column, _ in columns)})"


def _match(table: LeaseTable, *, epoch: bool = False) -> str:
    """The lease rows ``l`` of the scope and owner named by the unnested ``b``."""
    return " AND ".join(
        [
            *(f"l.{column} = %({column})s" for column in table.scope),
            f"l.{table.owner} = %(owner)s",
            *(f"l.{column} = b.{column}" for column in table.slot_columns),
            *([f"l.{table.epoch} = b.epoch"] if epoch else []),
        ]
    )


@PostgresDriver.register
class PostgresLeaseQueries(LeaseQueries):
    binds_slot_lists = True

    def build(self, table: LeaseTable) -> LeaseStatements:
        scope = [f"%({column})s" for column in table.scope]
        slots = [f"b.{column}" for column in table.slot_columns]
        created = ["%(now)s" for _ in table.created]
        touch = "".join(f", {column} = %(now)s" for column in table.touched)
        listed = "(SELECT unnest(%(slots)s::int[]))"
        single = len(table.slots) == 1 and bool(table.scope)
        insert = (
            f"INSERT INTO {table.name} ({insert_columns(table)}) "
            f"SELECT {', '.join([*scope, *slots, '%(owner)s', '%(until)s', '1', *created])} "
            f"FROM {_unnest(table)} ORDER BY {', '.join(slots)}"
        )
        return LeaseStatements(
            **shared_statements(table),
            take=insert + conflict_take(table),
            take_or_renew=insert + conflict_take(table, renew_own=True),
            renew=(
                f"UPDATE {table.name} AS l SET {table.until} = %(until)s{touch} "
                f"FROM {_unnest(table, ('epoch', 'bigint'))} "
                f"WHERE {_match(table, epoch=True)} "
                f"RETURNING {', '.join(f'l.{column}' for column in table.slot_columns)}"
            ),
            release=(
                f"UPDATE {table.name} AS l SET {table.owner} = NULL, {table.until} = 0{touch} "
                f"FROM {_unnest(table)} WHERE {_match(table)}"
            ),
            ensure=(
                ensure_statement(table, "unnest(%(slots)s::int[]) AS ids (id)", "ids.id")
                if single
                else ""
            ),
            hold=hold_statement(table, listed) if single else "",
        )
