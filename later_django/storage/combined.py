"""PostgreSQL: a batch of writes to several tables as one statement.

A job batch touches the queue, the records, the index and the leases; written
one statement per table, that is a round trip each, plus ``BEGIN`` and
``COMMIT``. PostgreSQL runs the data-modifying ``WITH`` parts of one statement
together and atomically, and outside a transaction a single statement is its
own transaction, so :class:`CombinedWrite` joins the named statements of the
storage parts (the same SQL the per-table methods run) as
``WITH p0 AS (...), p1 AS (...) SELECT ...``: one round trip for the batch.

Rules the callers keep: no row is written by two parts (PostgreSQL refuses
``ON CONFLICT`` touching a row twice, and the parts do not see each other's
changes), and no part reads what another part writes. The counter triggers
fire once per part, at the end of the statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections

from later_django.storage.db import statement_cursor
from later_django.storage.sql.queue import WAKE_CHANNEL


class CombinedWrite:
    """Parts gathered in order, then run as one statement on ``using`` (PostgreSQL)."""

    def __init__(self, using: str) -> None:
        self.using = using
        self._parts: list[str] = []
        self._params: list[Any] = []

    def add(self, sql: str, params: Sequence[Any]) -> None:
        self._parts.append(sql)
        self._params.extend(params)

    def execute(self, notify: str | None = None) -> None:
        """Runs the parts as one statement; with ``notify`` it also calls
        ``pg_notify`` once (delivered at commit, folded per transaction)."""
        if not self._parts and notify is None:
            return
        parts = ", ".join(f"p{index} AS ({sql})" for index, sql in enumerate(self._parts))
        head = f"WITH {parts} " if parts else ""
        params = list(self._params)
        if notify is None:
            tail = "SELECT 1"
        else:
            tail = f"SELECT pg_notify('{WAKE_CHANNEL}', %s)"
            params.append(notify)
        with statement_cursor(connections[self.using]) as cursor:
            cursor.execute(head + tail, params)
