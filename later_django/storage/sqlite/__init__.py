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
import re
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import cache
from operator import itemgetter
from typing import Any, ClassVar

from django.db import transaction

from later_django.storage.driver import (
    PLACEHOLDER,
    VALUES_MARKER,
    Driver,
    Params,
    Row,
    RowsStatement,
)

#: What Django's SQLite cursor rewrites: a placeholder, or an escaped ``%``.
_DJANGO_FORM = re.compile(r"%%|%s")
#: Changes whenever another connection commits (this connection's own commits leave it).
DATA_VERSION = "PRAGMA data_version"


@dataclass(frozen=True)
class PositionalRows:
    """A :class:`RowsStatement` turned positional once: the text before and after
    ``{values}``, the row group, and the parameter name behind each ``%s``.

    Positional because SQLite finds a named parameter by scanning its list of
    names: binding tens of thousands of them by name takes quadratic time (a
    20,000-row publish held the write lock for minutes), while ``?`` binds in order.
    """

    head: str
    head_names: tuple[str, ...]
    row: str
    row_names: tuple[str, ...]
    tail: str
    tail_names: tuple[str, ...]

    def sql(self, rows: int, *, qmark: bool = False) -> str:
        """The statement for ``rows`` rows: in Django's form (``%s``, ``%%``), or with
        ``qmark`` in sqlite3's own (``?``, ``%``) for a cursor of sqlite3 itself."""
        if rows < 1:
            raise ValueError(f"a rows statement needs at least one row, not {rows}")
        if qmark:
            return _qmark(self.head) + ", ".join([_qmark(self.row)] * rows) + _qmark(self.tail)
        return self.head + ", ".join([self.row] * rows) + self.tail

    def params(self, rows: Sequence[Params], shared: Params) -> list[Any]:
        """The values in placeholder order; a row-group name the rows lack is shared
        (every row has the same fields). Per row: one ``itemgetter`` call and one
        ``extend`` per run of row fields or of shared values (this runs for every
        value of a batch)."""
        values = [shared[name] for name in self.head_names]
        if len(rows) == 1:  # a single enqueue's row: looked up by name, no runs to plan
            row = rows[0]
            values += [row[name] if name in row else shared[name] for name in self.row_names]
        elif rows:
            fields = [name for name in self.row_names if name in rows[0]]
            pick = itemgetter(*fields) if fields else None
            runs = self._runs(rows[0], shared)
            for row in rows:
                picked = pick(row) if pick is not None else ()
                if len(fields) == 1:
                    picked = (picked,)
                if runs is None:
                    values += picked
                    continue
                for run in runs:
                    values += run if isinstance(run, tuple) else picked[run]
        return values + [shared[name] for name in self.tail_names]

    def _runs(self, first: Params, shared: Params) -> list[tuple[Any, ...] | slice] | None:
        """The row group as runs: a tuple of shared values, or a slice of the picked
        row fields; ``None`` when every name of the group is a row field."""
        if all(name in first for name in self.row_names):
            return None
        runs: list[tuple[Any, ...] | slice] = []
        picked = 0
        for name in self.row_names:
            is_field = name in first
            if is_field:
                if runs and isinstance(runs[-1], slice):
                    runs[-1] = slice(runs[-1].start, picked + 1)
                else:
                    runs.append(slice(picked, picked + 1))
                picked += 1
            elif runs and isinstance(runs[-1], tuple):
                runs[-1] = (*runs[-1], shared[name])
            else:
                runs.append((shared[name],))
        return runs


def _positional(text: str) -> tuple[str, tuple[str, ...]]:
    return PLACEHOLDER.sub("%s", text), tuple(PLACEHOLDER.findall(text))


@cache
def _qmark(text: str) -> str:
    """Django's form of a statement's text (``%s``, ``%%``) in sqlite3's (``?``, ``%``),
    as Django's SQLite cursor rewrites it at every run; once per text here."""
    return _DJANGO_FORM.sub(lambda match: "%" if match.group() == "%%" else "?", text)


def _new_cursor(connection: sqlite3.Connection) -> sqlite3.Cursor:
    return connection.cursor()


@cache
def positional_rows(statement: RowsStatement) -> PositionalRows:
    """``statement`` compiled to :class:`PositionalRows` (once per statement)."""
    head, tail = statement.sql.split(VALUES_MARKER)
    return PositionalRows(*_positional(head), *_positional(statement.row), *_positional(tail))


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
