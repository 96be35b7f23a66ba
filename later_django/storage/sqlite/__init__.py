"""The SQLite driver: JSON arrays for lists, multi-row ``VALUES`` for batches.

SQLite has no array parameters: a list binds as one JSON array (read with
``json_each(%(name)s)``) and a batch of rows as one ``INSERT ... VALUES``
with a placeholder group per row, split into several statements (in one
transaction) only when the rows exceed the bound-variable limit. Writes that
must hold the write lock run in ``BEGIN IMMEDIATE`` (the connection's
``transaction_mode``, checked by ``later_django.W001``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

from django.db import transaction

from later_django.storage.driver import Driver, Params, Row, RowsStatement
from later_django.storage.rows import PositionalRows, positional_rows

__all__ = ["DATA_VERSION", "PositionalRows", "SqliteDriver", "positional_rows"]

#: Changes whenever another connection commits (this connection's own commits leave it).
DATA_VERSION = "PRAGMA data_version"


def _new_cursor(connection: sqlite3.Connection) -> sqlite3.Cursor:
    return connection.cursor()


class SqliteDriver(Driver):
    vendor: ClassVar[str] = "sqlite"
    #: Filled by later_django.storage.sqlite.queries, which stores.driver_class imports
    #: when an alias of this vendor is first used.
    query_classes: ClassVar[dict[type, type]] = {}

    def execute_rows(
        self,
        statement: RowsStatement,
        rows: Sequence[Params],
        shared: Params | None = None,
        *,
        returning: bool = False,
    ) -> list[Row]:
        if not rows:
            return []
        compiled = positional_rows(statement)
        if len(rows) == 1:  # a single enqueue: no limit to ask for
            chunks = [rows]
        else:
            fixed = len(compiled.head_names) + len(compiled.tail_names)
            limit = self.variable_limit() - fixed
            per_statement = max(1, limit // max(len(compiled.row_names), 1))
            chunks = [rows[at : at + per_statement] for at in range(0, len(rows), per_statement)]
        returned: list[Row] = []
        # Django's query log (DEBUG, CaptureQueriesContext) formats the statement it
        # records with %s: while it logs, the statement goes through Django's cursor.
        qmark = not self.connection.queries_logged
        with (
            transaction.atomic(using=self.using) if len(chunks) > 1 else nullcontext(),
            # sqlite3's own cursor: Django's rewrites every statement's %s with a
            # regular expression (about a tenth of a single enqueue's time).
            self.library_cursor(_new_cursor) if qmark else self.cursor() as cursor,
        ):
            for chunk in chunks:
                sql = compiled.sql(len(chunk), qmark=qmark)
                cursor.execute(sql, compiled.params(chunk, shared or {}))
                if returning:
                    returned += [tuple(row) for row in cursor.fetchall()]
        return returned

    def variable_limit(self) -> int:
        """How many parameters one statement may bind on this connection.

        Asked of SQLite itself: Django 5.2 reports a fixed 999 (6.0 and later ask
        SQLite too), which would split a 500-job batch into several statements.
        """
        connection = self.connection
        connection.ensure_connection()
        limit: int = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        return limit

    def list_param(self, values: Sequence[Any]) -> Any:
        return json.dumps(list(values))

    def write_transaction(self) -> AbstractContextManager[None]:
        return transaction.atomic(using=self.using)

    @property
    def serializes_writes(self) -> bool:
        return True

    def change_counter(self) -> int:
        """``PRAGMA data_version``: changes when another connection commits."""
        with self.cursor() as cursor:
            cursor.execute(DATA_VERSION)
            return int(cursor.fetchone()[0])
