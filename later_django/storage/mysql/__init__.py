"""The MySQL/MariaDB driver: JSON arrays for lists, positional rows for batches,
and a write followed by a read where PostgreSQL and SQLite use ``RETURNING``.

Django reports ``"mysql"`` for MariaDB as well. A list binds as one JSON array,
read with ``JSON_TABLE``; a batch of rows is one statement whose row groups repeat
(:mod:`later_django.storage.rows`, shared with SQLite), split by the size of the
server's packet (mysqlclient binds on the client: there is no variable limit)
into several statements in one transaction. MySQL has no ``RETURNING``: a vendor
statement that needs one is a :class:`~later_django.storage.driver.Returning`
(writes, then a read), which this driver's cursors run; an insert's new ids are
what its ``lastrowid`` says (``RowsStatement.auto_ids``: :meth:`MysqlDriver.
auto_increment`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import cache
from typing import Any, ClassVar

from django.db import transaction

from later_django.storage.driver import (
    Driver,
    Params,
    Returning,
    Row,
    RowsStatement,
    WakeChannel,
)
from later_django.storage.local_wake import LocalWakeChannel, ring_at_commit
from later_django.storage.rows import PositionalRows, positional_rows

#: A batch's statement stays under this share of ``max_allowed_packet``: the values'
#: sizes are estimated (escaping may double a blob), never measured after binding.
_PACKET_SHARE = 0.4
#: How long a worker's statement waits for a row lock before error 1205: its turn is
#: then tried again. The server's default (50 s) would stall every job of the process
#: behind one long transaction; the worker's own transactions last milliseconds.
WORKER_LOCK_WAIT_SECONDS = 3
#: mysqlclient's error codes of a lost lock conflict -> ``Driver.lock_conflict``'s kind.
_CONFLICTS = {1213: "deadlock", 1205: "lock_wait"}
#: What a bound value costs in the statement besides its bytes (quotes, separators).
_VALUE_OVERHEAD = 16


#: What a :class:`Returning` whose locking read found nothing answers: no row.
_NO_ROW = "SELECT 1 FROM DUAL WHERE FALSE"


class ReturningCursor:
    """Django's cursor of a MySQL connection that runs a :class:`Returning`: its
    locking read if it has one, its writes, then its read (whose rows
    ``fetchone``/``fetchall`` return), in the caller's transaction or in one of their
    own. Any other statement runs as is."""

    def __init__(self, cursor: Any, driver: MysqlDriver) -> None:
        self._cursor = cursor
        self._driver = driver

    def __enter__(self) -> ReturningCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cursor.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def execute(self, sql: str, params: Any = None) -> Any:
        if not isinstance(sql, Returning):
            return self._cursor.execute(sql, params)
        with self._driver.own_transaction():
            if sql.lock:
                self._cursor.execute(sql.lock, params)
                locked = [row[0] for row in self._cursor.fetchall()]
                if not locked:
                    # Nothing locked, nothing to write: the answer is no row.
                    return self._cursor.execute(_NO_ROW)
                params = {**(params or {}), "locked": self._driver.list_param(locked)}
            for write in sql.writes:
                self._cursor.execute(write, params)
            return self._cursor.execute(sql.read, params)


@cache
def _compiled(statement: RowsStatement) -> tuple[PositionalRows | None, ...]:
    """``statement``'s ``before``, ``sql`` and ``read`` as positional rows (once each)."""
    return tuple(
        positional_rows(RowsStatement(text, statement.row, joiner=statement.joiner))
        if text
        else None
        for text in (statement.before, statement.sql, statement.read)
    )


class MysqlDriver(Driver):
    vendor: ClassVar[str] = "mysql"
    #: Filled by later_django.storage.mysql.queries, which stores.driver_class imports
    #: when an alias of this vendor is first used.
    query_classes: ClassVar[dict[type, type]] = {}

    def __init__(self, using: str) -> None:
        super().__init__(using)
        self._packet_limit: int | None = None
        self._auto_increment: tuple[bool, int] | None = None

    def cursor(self) -> Any:
        return ReturningCursor(self.connection.cursor(), self)

    def own_transaction(self) -> AbstractContextManager[None]:
        """A transaction for statements that must run together: the caller's when
        there is one (no savepoint: a failure propagates and aborts it anyway),
        else one of their own."""
        if self.connection.in_atomic_block:
            return nullcontext()
        return transaction.atomic(using=self.using)

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
        before, write, read = _compiled(statement)
        if write is None:
            raise ValueError("a rows statement needs its sql")
        if returning and read is None and not statement.auto_ids:
            raise NotImplementedError(
                "MySQL has no RETURNING: this rows statement needs a read to return rows"
            )
        shared = shared or {}
        chunks = self._chunks(rows)
        returned: list[Row] = []
        # A single consecutive-ids insert answers its ids itself: no transaction.
        answers_itself = statement.auto_ids and self.auto_increment()[0]
        together = len(chunks) > 1 or before is not None or (returning and not answers_itself)
        with (
            self.own_transaction() if together else nullcontext(),
            self.connection.cursor() as cursor,
        ):
            for chunk in chunks:
                if before is not None:
                    cursor.execute(before.sql(len(chunk)), before.params(chunk, shared))
                if returning and statement.auto_ids:
                    returned += self._insert_ids(cursor, write, chunk, shared)
                    continue
                cursor.execute(write.sql(len(chunk)), write.params(chunk, shared))
                if returning and read is not None:
                    cursor.execute(read.sql(len(chunk)), read.params(chunk, shared))
                    returned += [tuple(row) for row in cursor.fetchall()]
        return returned

    def _insert_ids(
        self, cursor: Any, insert: PositionalRows, rows: Sequence[Params], shared: Params
    ) -> list[Row]:
        """Inserts ``rows`` (an ``auto_ids`` statement) and answers the id each took, in
        row order. Consecutive ids (lock mode 0 or 1): one multi-row ``INSERT``, whose
        rows took ``lastrowid``, ``lastrowid + step``... Interleaved (2): one ``INSERT``
        per row, sent together, each answering its own id."""
        consecutive, step = self.auto_increment()
        if consecutive or len(rows) == 1:
            cursor.execute(insert.sql(len(rows)), insert.params(rows, shared))
            first = int(cursor.lastrowid)
            return [(first + at * step,) for at in range(len(rows))]
        params: list[Any] = []
        for row in rows:
            params += insert.params([row], shared)
        cursor.execute(";\n".join([insert.sql(1)] * len(rows)), params)
        ids = [(int(cursor.lastrowid),)]
        while cursor.nextset():
            ids.append((int(cursor.lastrowid),))
        if len(ids) != len(rows):
            raise RuntimeError(f"{len(rows)} inserts answered {len(ids)} ids")
        return ids

    def auto_increment(self) -> tuple[bool, int]:
        """Whether one multi-row ``INSERT`` takes consecutive ``AUTO_INCREMENT`` ids,
        and the step between them (asked once per driver). InnoDB promises them
        consecutive for a multi-row ``VALUES`` under ``innodb_autoinc_lock_mode`` 0 and
        1 (MariaDB's default); under 2 (MySQL 8's default) only unique and increasing.
        The step is ``auto_increment_increment`` (1, unless Galera or a multi-source
        setup spaces the ids)."""
        if self._auto_increment is None:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT @@innodb_autoinc_lock_mode, @@auto_increment_increment")
                mode, step = cursor.fetchone()
            self._auto_increment = (int(mode) in (0, 1), int(step))
        return self._auto_increment

    def _chunks(self, rows: Sequence[Params]) -> list[Sequence[Params]]:
        """``rows`` cut so that each statement's estimated size stays well inside the
        server's ``max_allowed_packet``."""
        if len(rows) == 1:
            return [rows]
        limit = self.packet_limit() * _PACKET_SHARE
        chunks: list[Sequence[Params]] = []
        start, size = 0, 0
        for at, row in enumerate(rows):
            row_size = sum(
                2 * len(value) + _VALUE_OVERHEAD
                if isinstance(value, bytes | str)
                else _VALUE_OVERHEAD
                for value in row.values()
            )
            if size and size + row_size > limit:
                chunks.append(rows[start:at])
                start, size = at, 0
            size += row_size
        chunks.append(rows[start:])
        return chunks

    def packet_limit(self) -> int:
        """The server's ``max_allowed_packet`` (asked once per driver)."""
        if self._packet_limit is None:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT @@max_allowed_packet")
                self._packet_limit = int(cursor.fetchone()[0])
        return self._packet_limit

    def list_param(self, values: Sequence[Any]) -> Any:
        return json.dumps(list(values))

    def write_transaction(self) -> AbstractContextManager[None]:
        # InnoDB releases an autocommit statement's row locks when it ends: what must
        # hold them together runs in a transaction (a savepoint inside the caller's).
        return transaction.atomic(using=self.using)

    polls_for_work: ClassVar[bool] = True

    def wake_channel(self) -> WakeChannel:
        """This process's own commits (:mod:`later_django.storage.local_wake`): MySQL
        has no notifications, and a worker polls for what other processes publish."""
        return LocalWakeChannel()

    def wants_wake_notification(self) -> bool:
        """Rings this process's waiting workers when the transaction commits; no
        statement carries a notification (there is none to send), so: False."""
        ring_at_commit(self.using)
        return False

    def bound_lock_waits(self) -> None:
        """``innodb_lock_wait_timeout`` for the session (the server's default is 50 s)."""
        with self.connection.cursor() as cursor:
            cursor.execute(f"SET SESSION innodb_lock_wait_timeout = {WORKER_LOCK_WAIT_SECONDS:d}")

    def lock_conflict(self, error: BaseException) -> str | None:
        """1213 (the transaction was rolled back to break a deadlock) and 1205 (a
        row lock waited ``innodb_lock_wait_timeout``), as mysqlclient reports them."""
        cause = error.__cause__ if error.__cause__ is not None else error
        code = cause.args[0] if getattr(cause, "args", None) else None
        return _CONFLICTS.get(code) if isinstance(code, int) else None
