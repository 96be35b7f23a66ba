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
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ClassVar

from django.db import transaction

from later_django.storage.driver import (
    PLACEHOLDER,
    VALUES_MARKER,
    Driver,
    Params,
    Row,
    RowsStatement,
    prefix_placeholders,
    to_positional,
)

#: Changes whenever another connection commits (this connection's own commits leave it).
DATA_VERSION = "PRAGMA data_version"


def expand_rows(statement: RowsStatement, count: int, shared: Iterable[str] = ()) -> str:
    """``statement.sql`` with ``{values}`` replaced by ``count`` copies of its row
    group, the copy for row ``i`` naming its row parameters ``r<i>_<field>``
    (names in ``shared`` are bound once and keep their name)."""
    if count < 1:
        raise ValueError(f"a rows statement needs at least one row, not {count}")
    keep = set(shared)
    groups = ", ".join(
        prefix_placeholders(statement.row, f"r{index}_", keep=keep) for index in range(count)
    )
    return statement.sql.replace(VALUES_MARKER, groups)


class SqliteDriver(Driver):
    vendor: ClassVar[str] = "sqlite"
    #: Filled by later_django.storage.sqlite.queries (imported by stores.py).
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
        # Bound positionally (below), so every occurrence of a placeholder is a variable.
        per_row = max(len(PLACEHOLDER.findall(statement.row)), 1)
        fixed = len(PLACEHOLDER.findall(statement.sql))
        limit = (self.connection.features.max_query_params or 999) - fixed
        per_statement = max(1, limit // per_row)
        chunks = [
            rows[start : start + per_statement] for start in range(0, len(rows), per_statement)
        ]
        returned: list[Row] = []
        with (
            transaction.atomic(using=self.using) if len(chunks) > 1 else nullcontext(),
            self.cursor() as cursor,
        ):
            for chunk in chunks:
                params = dict(shared or {})
                for index, row in enumerate(chunk):
                    for field, value in row.items():
                        params[f"r{index}_{field}"] = value
                # Positional: binding thousands of named parameters is quadratic in SQLite.
                cursor.execute(
                    *to_positional(expand_rows(statement, len(chunk), shared or ()), params)
                )
                if returning:
                    returned += [tuple(row) for row in cursor.fetchall()]
        return returned

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
