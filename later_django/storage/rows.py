"""Rows statements bound positionally: the multi-row ``VALUES`` of the drivers whose
vendor has no array parameters (SQLite, MySQL/MariaDB).

A :class:`~later_django.storage.driver.RowsStatement` whose ``sql`` holds ``{values}``
is compiled once into :class:`PositionalRows`: the text around ``{values}``, the row
group repeated once per row (joined by the statement's ``joiner``: ``", "`` for a
``VALUES`` list, ``" UNION ALL "`` for MySQL's derived rows), and the parameter name
behind each ``%s``, so that a batch binds its values in order, never by name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from operator import itemgetter
from typing import Any

from later_django.storage.driver import PLACEHOLDER, VALUES_MARKER, Params, RowsStatement

#: What Django's SQLite cursor rewrites: a placeholder, or an escaped ``%``.
_DJANGO_FORM = re.compile(r"%%|%s")


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
    #: What separates two row groups: ``", "`` in a ``VALUES`` list.
    joiner: str = ", "

    def sql(self, rows: int, *, qmark: bool = False) -> str:
        """The statement for ``rows`` rows: in Django's form (``%s``, ``%%``), or with
        ``qmark`` in sqlite3's own (``?``, ``%``) for a cursor of sqlite3 itself."""
        if rows < 1:
            raise ValueError(f"a rows statement needs at least one row, not {rows}")
        if qmark:
            return (
                _qmark(self.head) + self.joiner.join([_qmark(self.row)] * rows) + _qmark(self.tail)
            )
        return self.head + self.joiner.join([self.row] * rows) + self.tail

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


@cache
def positional_rows(statement: RowsStatement) -> PositionalRows:
    """``statement`` compiled to :class:`PositionalRows` (once per statement)."""
    head, tail = statement.sql.split(VALUES_MARKER)
    return PositionalRows(
        *_positional(head), *_positional(statement.row), *_positional(tail), statement.joiner
    )
