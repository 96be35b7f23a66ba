"""The PostgreSQL driver: server-side binding, arrays, one statement per batch.

Statements run on a psycopg ``Cursor`` (server-side parameter binding) of
Django's connection instead of Django's default ``ClientCursor``: a batch's
arrays of ids and MessagePack blobs travel as binary parameters rather than
literals the server must parse (about 0.2 ms less per statement measured
here). It is the same connection and transaction, wrapped like any Django
cursor. Lists bind as arrays (read with ``= ANY(%(name)s)``); many rows bind
as one array per field (read with ``unnest``); a batch's writes to several
tables may run as one ``WITH`` statement (:mod:`later_django.storage.batch`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, ClassVar

from django.db import transaction
from django.db.backends.utils import CursorWrapper

from later_django.storage.driver import Driver, Params, Replanned, Row, RowsStatement, WakeChannel

#: The session's commits return before their WAL reaches disk (see relax_commit_durability).
ASYNCHRONOUS_COMMIT = "SET synchronous_commit = off"
#: ``Driver.index_walks_only``: the setting as it was (read first: the sub-select
#: with ``OFFSET 0`` is not flattened), then off to the end of the transaction.
PIN_INDEX_WALKS = (
    "SELECT seq, bitmap, set_config('enable_seqscan', 'off', true),"
    " set_config('enable_bitmapscan', 'off', true)"
    " FROM (SELECT current_setting('enable_seqscan') AS seq,"
    " current_setting('enable_bitmapscan') AS bitmap OFFSET 0) AS setting"
)
UNPIN_INDEX_WALKS = (
    "SELECT set_config('enable_seqscan', %(seq)s, true),"
    " set_config('enable_bitmapscan', %(bitmap)s, true)"
)
#: A statement is prepared on the server at its fifth run on a worker's session
#: (psycopg's own default; Django's connections default to never): the claim, the
#: start and the outcome run thousands of times, a rare maintenance statement not
#: enough to be worth a prepared statement (see keep_statements_prepared).
WORKER_PREPARE_THRESHOLD = 5


def _columns(rows: Sequence[Params], shared: Params | None) -> dict[str, Any]:
    """``shared`` plus one list per row field (the rows transposed)."""
    params = dict(shared or {})
    for field in rows[0]:
        params[field] = [row[field] for row in rows]
    return params


#: SQLSTATEs of a lost lock conflict -> ``Driver.lock_conflict``'s kind.
_CONFLICTS = {"40P01": "deadlock", "55P03": "lock_wait"}


class PostgresDriver(Driver):
    vendor: ClassVar[str] = "postgresql"
    #: Filled by later_django.storage.postgres.queries, which stores.driver_class imports
    #: when an alias of this vendor is first used.
    query_classes: ClassVar[dict[type, type]] = {}

    def cursor(self) -> Any:
        """The connection's kept cursor (:class:`_KeptCursor`). While Django logs
        queries (DEBUG, CaptureQueriesContext) a new one per statement that prepares
        nothing instead: Django 5.2 logs a prepared statement's text as None."""
        connection = self.connection
        if connection.queries_logged or connection.allow_thread_sharing:
            return self.library_cursor(_unprepared_new_cursor)
        kept: _KeptCursor | None = getattr(connection, _KEPT, None)
        if kept is not None and kept.busy:
            # A statement inside another's ``with`` block: its own cursor, so neither
            # reads the other's result.
            return self.library_cursor(_new_cursor)
        raw = self.ready_connection().connection
        if kept is None or kept.cursor.connection is not raw or kept.cursor.closed:
            kept = self.library_cursor(_new_cursor, wrap=_KeptCursor)
            setattr(connection, _KEPT, kept)
        else:
            connection.validate_thread_sharing()
        return kept

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
        with self.cursor() as cursor:
            cursor.execute(*self.rows_part(statement, rows, shared))
            return [tuple(row) for row in cursor.fetchall()] if returning else []

    def rows_part(
        self, statement: RowsStatement, rows: Sequence[Params], shared: Params | None = None
    ) -> tuple[str, dict[str, Any]]:
        if len(rows) == 1 and statement.one:
            return statement.one, {**(shared or {}), **rows[0]}
        return statement.sql, _columns(rows, shared)

    def list_param(self, values: Sequence[Any]) -> Any:
        return list(values)

    @contextmanager
    def index_walks_only(self) -> Iterator[None]:
        """``enable_seqscan`` and ``enable_bitmapscan`` off for the block (``SET
        LOCAL``, as the claim function's own settings), then back to what they were:
        a savepoint released inside the caller's transaction would otherwise leave
        them off for the caller's later statements. A bitmap walk reads its whole
        index range before a ``LIMIT`` can stop it; an index walk stops there. (The
        block's statements should run only under it: a plan the session caches for
        a prepared statement keeps the settings it was made with.)"""
        with self.atomic():
            row = self.fetch_one(PIN_INDEX_WALKS)
            yield
            seq, bitmap = (row[0], row[1]) if row else ("on", "on")
            self.execute(UNPIN_INDEX_WALKS, {"seq": seq, "bitmap": bitmap})

    def write_transaction(self) -> AbstractContextManager[None]:
        return nullcontext()

    @property
    def combines_statements(self) -> bool:
        return True

    def lock_conflict(self, error: BaseException) -> str | None:
        """``deadlock_detected`` (40P01) and ``lock_not_available`` (55P03: a
        ``lock_timeout`` the operator set) by their SQLSTATE."""
        cause = error.__cause__ if error.__cause__ is not None else error
        return _CONFLICTS.get(getattr(cause, "sqlstate", None) or "")

    def wants_wake_notification(self) -> bool:
        """True once per transaction: PostgreSQL delivers notifications at commit
        and folds identical ones, so the first publish of a transaction carries
        the wake-up and later ones need not. A marker callback registered with
        ``on_commit`` records that this transaction already notifies; it is
        discarded with the transaction (or savepoint) that rolls back."""
        connection = self.connection
        if not connection.in_atomic_block:
            return True
        if any(callback is _notified_marker for _, callback, _ in connection.run_on_commit):
            return False
        transaction.on_commit(_notified_marker, using=self.using)
        return True

    def relax_commit_durability(self) -> None:
        """``synchronous_commit = off`` for the session (a session setting: behind
        a pooler in transaction mode it stays on whichever server connection ran it)."""
        with self.connection.cursor() as cursor:
            cursor.execute(ASYNCHRONOUS_COMMIT)

    def keep_statements_prepared(self) -> None:
        """psycopg's ``prepare_threshold`` for the session, unless Django's
        ``OPTIONS["prepare_threshold"]`` set one: each of later_django's statements
        (and any of the session's server-bound statements) is parsed and planned
        once, measured at 0.07-0.1 ms of the server's CPU less per statement here."""
        raw = self.connection.connection
        if raw.prepare_threshold is None:
            raw.prepare_threshold = WORKER_PREPARE_THRESHOLD

    def wake_channel(self) -> WakeChannel:
        # Imported when used: psycopg loads libpq (about 9 MB per process), which a
        # process that only ever talks to SQLite should not pay for.
        from later_django.storage.postgres.listener import PostgresWakeChannel

        return PostgresWakeChannel(self.using)


#: The attribute of a Django connection that holds its :class:`_KeptCursor`.
_KEPT = "_later_kept_cursor"
#: A kept cursor is closed (and a new one made for the next statement) after a
#: result of more rows than this, so a large read's rows are not held in memory.
KEEP_RESULT_ROWS = 1_000


class _KeptCursor(CursorWrapper):
    """Django's cursor wrapper (errors as Django's, ``execute_wrapper`` hooks) around
    the one psycopg cursor a connection keeps for later_django's statements: the end
    of a ``with`` block leaves it open for the next statement instead of closing it.
    Making a cursor (its adapters, the binary list dumper) cost about a fifth of an
    enqueue's Python time inside a transaction (docs/benchmarks.md, "A kept cursor").
    Kept per Django connection, i.e. per thread; made again when the connection is
    replaced; never kept for a connection shared between threads. Callers use it in
    a ``with`` block: while one is open, a statement run meanwhile gets a cursor of
    its own (``busy``)."""

    busy = False

    def __enter__(self) -> _KeptCursor:
        self.busy = True
        return self

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        self.busy = False
        if self.cursor.rowcount > KEEP_RESULT_ROWS:
            self.cursor.close()


def _psycopg() -> Any:
    """psycopg, imported at first use (see ``wake_channel``: libpq's memory)."""
    import psycopg

    return psycopg


def _new_cursor(connection: Any, *, unprepared: bool = False) -> Any:
    """A psycopg ``Cursor`` (server-side binding; with ``unprepared`` one that never
    prepares) whose lists bind as binary arrays: in text form psycopg quotes every
    string of a list through a regular expression and spells every bytea in hex (tens
    of calls per job of a batch)."""
    cursor = (_unprepared_cursor() if unprepared else _later_cursor())(connection)
    cursor.adapters.register_dumper(list, _list_binary_dumper())
    return cursor


def _unprepared_new_cursor(connection: Any) -> Any:
    return _new_cursor(connection, unprepared=True)


@functools.cache
def _later_cursor() -> Any:
    """A psycopg ``Cursor`` that prepares by the connection's ``prepare_threshold``,
    but never a :class:`~later_django.storage.driver.Replanned` statement (made at
    first use: see ``_psycopg``)."""

    class LaterCursor(_psycopg().Cursor):  # type: ignore[misc]
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            if isinstance(query, Replanned):
                options["prepare"] = False
            return super().execute(query, params, **options)

    return LaterCursor


@functools.cache
def _unprepared_cursor() -> Any:
    """A psycopg ``Cursor`` that runs every statement unprepared, whatever the
    connection's ``prepare_threshold`` (made at first use: see ``_psycopg``)."""

    class UnpreparedCursor(_psycopg().Cursor):  # type: ignore[misc]
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            return super().execute(query, params, **{**options, "prepare": False})

    return UnpreparedCursor


def _list_binary_dumper() -> Any:
    from psycopg.types.array import ListBinaryDumper

    return ListBinaryDumper


def _notified_marker() -> None:
    """Registered with ``on_commit`` to mark a transaction that already notifies."""
