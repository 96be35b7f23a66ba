"""``Driver``: how later_django's statements run on one database vendor.

A store (``kv``, ``index``, ``queue``, ...) holds the logic that is the same on
every database and asks its driver for two things: the vendor's statements
(``driver.queries(KvQueries)``: the vendor's subclass of the store's query
class) and the few operations whose shape differs per vendor (binding a list,
writing many rows at once, the write lock of a transaction). Vendor-specific
code lives in ``storage/postgres/`` and ``storage/sqlite/``; the one place that
looks at ``connection.vendor`` is :func:`later_django.storage.stores.driver_for`.

Every statement uses named parameters (``%(name)s``): a name bound once may
appear several times, and nothing is built from values. The only SQL text
composed at run time repeats a fixed group of placeholders (SQLite's multi-row
``VALUES``) or prefixes placeholder names (PostgreSQL's combined write).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

Params = Mapping[str, Any]
Row = tuple[Any, ...]
Q = TypeVar("Q")

#: A named parameter in a statement: ``%(name)s``.
PLACEHOLDER = re.compile(r"%\((\w+)\)s")
VALUES_MARKER = "{values}"


class Replanned(str):
    """A statement the server plans at every run, never from a plan cached for a
    prepared statement: one whose right plan depends on how many rows a table holds
    now. A generic plan made while the table was nearly empty (a fresh database; a
    server without autovacuum, which never analyses it) keeps scanning the whole
    table once it has grown, until an ``ANALYZE`` invalidates the plan. Drivers
    that prepare nothing run it as any other statement."""

    __slots__ = ()


class Returning(str):
    """A write and the read that answers what ``RETURNING`` would have, for a vendor
    without ``RETURNING`` (MySQL/MariaDB): ``writes`` run in order, then ``read``, all
    with the caller's parameters, on one connection and in one transaction (the
    caller's, or one of their own). Only the MySQL driver's cursor runs it. Its text,
    for logs and errors, is every statement behind a word no SQL starts with: run as
    text by mistake (mysqlclient allows several statements per call), the server
    refuses it before any write.

    ``lock`` (optional, "lock then write"): a locking read run first, for a write that
    must touch only rows it has locked (``FOR UPDATE SKIP LOCKED``). The values of its
    first column are bound, as one list parameter (``Driver.list_param``) named
    ``locked``, to the writes and the read; when it finds no row, nothing else runs and
    the statement returns no row."""

    writes: tuple[str, ...]
    read: str
    lock: str

    def __new__(cls, writes: Sequence[str], read: str, lock: str = "") -> Returning:
        parts = [lock] if lock else []
        statement = super().__new__(
            cls, "RETURNING_EMULATED " + ";\n".join([*parts, *writes, read])
        )
        statement.writes = tuple(writes)
        statement.read = read
        statement.lock = lock
        return statement


@dataclass(frozen=True)
class RowsStatement:
    """A statement that writes many rows in one round trip.

    PostgreSQL: ``sql`` reads one array parameter per row field (``%(key)s``
    is the list of every row's ``key``), typically through ``unnest``.
    SQLite: ``sql`` contains ``{values}``, replaced by one copy of ``row`` (a
    group of ``%(field)s`` placeholders) per row. Parameters outside the rows
    (``now``, ``namespace``) are passed once as ``shared``. ``one`` (PostgreSQL,
    optional): the same write for exactly one row, a scalar placeholder per
    field (``VALUES``), which a single enqueue takes: no arrays to bind and no
    ``unnest`` to plan (about 0.1 ms less per statement measured here).
    """

    sql: str
    row: str = ""
    one: str = ""
    #: Between two row groups (SQLite, MySQL): ``", "`` for a ``VALUES`` list,
    #: ``" UNION ALL "`` for MySQL's derived rows (``SELECT ... UNION ALL SELECT ...``).
    joiner: str = ", "
    #: MySQL: a statement of the same rows (``{values}``, ``row``, ``joiner``) run
    #: before ``sql`` in its transaction (what PostgreSQL's conflict clause decides
    #: row by row, done first: the range members an upsert must not keep).
    before: str = ""
    #: MySQL: a statement of the same rows run after ``sql``, returning what
    #: PostgreSQL's ``RETURNING`` returns (``execute_rows(returning=True)``).
    read: str = ""
    #: MySQL: ``sql`` is an ``INSERT ... VALUES {values}`` of one row per row group
    #: into a table whose ``AUTO_INCREMENT`` key is what ``RETURNING`` returns:
    #: ``execute_rows(returning=True)`` answers ``(id,)`` per row, in row order, from
    #: the ids the insert took (``cursor.lastrowid``), with no read.
    auto_ids: bool = False


class Subscription(Protocol):
    """An open subscription to the wake-up notifications (its own connection)."""

    def payloads(self, timeout: float) -> Iterable[str]:
        """The payloads of the notifications that arrive within ``timeout`` seconds
        (those already waiting at once); connection errors propagate."""
        ...


class WakeChannel(Protocol):
    """The notifications a committed publish sends to the waiting workers."""

    def subscribe(self) -> AbstractContextManager[Subscription]:
        """A new connection of its own, already listening; closed on exit."""
        ...

    def send_probe(self, payload: str) -> None:
        """Notifies ``payload`` from a second, short-lived connection."""
        ...


@functools.lru_cache(maxsize=1024)
def prefix_placeholders(sql: str, prefix: str, keep: frozenset[str] = frozenset()) -> str:
    """``sql`` with every ``%(name)s`` not in ``keep`` renamed ``%(<prefix>name)s``:
    how statements with clashing names are joined into one (a fixed rewrite of
    fixed text, never of values). Cached: the statements are the query classes'
    own text, so a worker or a web process rewrites each one once."""

    def rename(match: re.Match[str]) -> str:
        name = match.group(1)
        return match.group(0) if name in keep else f"%({prefix}{name})s"

    return PLACEHOLDER.sub(rename, sql)


class Driver:
    """Runs statements on the Django connection of the alias ``using``.

    Contract shared by every driver: each call joins the caller's transaction
    when there is one and autocommits otherwise; database errors surface as
    ``django.db`` exceptions (the cursor is Django's wrapper, so query logging
    and ``execute_wrapper`` hooks apply).
    """

    #: Django's ``connection.vendor`` this driver serves.
    vendor: ClassVar[str] = ""
    #: Store query class -> this vendor's subclass of it.
    query_classes: ClassVar[dict[type, type]] = {}

    def __init__(self, using: str) -> None:
        self.using = using

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.using!r})"

    @property
    def connection(self) -> BaseDatabaseWrapper:
        return connections[self.using]

    @classmethod
    def register(cls, queries: type[Q]) -> type[Q]:
        """Class decorator of a vendor's query class: registers it as this driver's
        statements for its direct base (the store's query class)."""
        cls.query_classes[queries.__bases__[0]] = queries
        return queries

    def queries(self, base: type[Q]) -> Q:
        """This vendor's statements of a store: the registered subclass of ``base``."""
        queries: Q = self.query_classes[base]()
        return queries

    # --- running statements ---

    def cursor(self) -> Any:
        """A cursor of the connection for later_django's statements."""
        return self.connection.cursor()

    def ready_connection(self) -> BaseDatabaseWrapper:
        """The alias's Django connection, health-checked and connected: what a cursor
        of the vendor's own library runs on."""
        connection = self.connection
        connection.close_if_health_check_failed()
        connection.ensure_connection()
        return connection

    def library_cursor(
        self,
        make: Callable[[Any], Any],
        wrap: Callable[[Any, BaseDatabaseWrapper], Any] | None = None,
    ) -> Any:
        """A cursor of the vendor's own library, ``make(raw connection)``, wrapped as
        Django wraps its own (errors as Django's, the query log), or by ``wrap(cursor,
        connection)``, a Django ``CursorWrapper`` class: what a driver uses where
        Django's cursor class would add work to every statement."""
        connection = self.ready_connection()
        with connection.wrap_database_errors:
            cursor = make(connection.connection)
        if wrap is None:
            return connection._prepare_cursor(cursor)  # checks the thread, as Django does
        connection.validate_thread_sharing()
        return wrap(cursor, connection)

    def execute(self, sql: str, params: Params | None = None) -> int:
        """Runs one statement; returns the number of rows it changed."""
        with self.cursor() as cursor:
            cursor.execute(sql, params or {})
            return int(cursor.rowcount)

    def fetch_all(self, sql: str, params: Params | None = None) -> list[Row]:
        with self.cursor() as cursor:
            cursor.execute(sql, params or {})
            return list(cursor.fetchall())

    def fetch_one(self, sql: str, params: Params | None = None) -> Row | None:
        with self.cursor() as cursor:
            cursor.execute(sql, params or {})
            row = cursor.fetchone()
            return None if row is None else tuple(row)

    def execute_rows(
        self,
        statement: RowsStatement,
        rows: Sequence[Params],
        shared: Params | None = None,
        *,
        returning: bool = False,
    ) -> list[Row]:
        """Writes ``rows`` (every row a mapping with the same fields) with
        ``statement`` in as few round trips as the vendor allows; with
        ``returning`` the rows the statement returns. Nothing happens for no rows."""
        raise NotImplementedError

    def rows_part(
        self, statement: RowsStatement, rows: Sequence[Params], shared: Params | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The statement and parameters that write ``rows`` in one statement, for
        drivers that combine statements (PostgreSQL); others raise."""
        raise NotImplementedError(f"the {self.vendor} driver does not combine statements")

    # --- vendor shapes ---

    def list_param(self, values: Sequence[Any]) -> Any:
        """One bound parameter holding a variable-length list (an array on
        PostgreSQL, a JSON array on SQLite); the statements read it accordingly."""
        raise NotImplementedError

    def write_transaction(self) -> AbstractContextManager[None]:
        """What a statement that must hold the database's write lock runs in:
        SQLite's ``BEGIN IMMEDIATE`` transaction (a savepoint inside the caller's);
        nothing on PostgreSQL, whose single statements lock their own rows."""
        raise NotImplementedError

    @contextmanager
    def atomic(self, *, savepoint: bool = True) -> Iterator[None]:
        """``transaction.atomic`` on this driver's alias."""
        with transaction.atomic(using=self.using, savepoint=savepoint):
            yield

    @contextmanager
    def index_walks_only(self) -> Iterator[None]:
        """A transaction (a savepoint inside the caller's) whose statements walk
        indexes, never a whole table: for a maintenance statement bounded by an
        index range and a ``LIMIT``, which a planner without statistics (a table
        never analyzed) or a generic plan may cost as cheaper read in full.
        PostgreSQL: ``enable_seqscan`` off for the block only; SQLite: nothing (its
        statements are shaped, or name their index, where it could choose a scan)."""
        with self.atomic():
            yield

    @property
    def combines_statements(self) -> bool:
        """Whether a batch's writes to several tables may run as one statement."""
        return False

    def wants_wake_notification(self) -> bool:
        """Whether a write that publishes messages should also wake the listening
        workers (``LISTEN``); drivers without notifications say no."""
        return False

    @property
    def serializes_writes(self) -> bool:
        """Whether every write transaction takes the database's one write lock, so
        that a claimer does better to read first (no lock) whether anything is ready."""
        return False

    # --- the worker's session and wake-up ---

    def relax_commit_durability(self) -> None:
        """Lets this thread's connection, for the rest of its session, commit
        without waiting for the commit to reach disk (a crash may lose the last
        fraction of a second of its commits, never corrupt them). Drivers whose
        vendor has no such setting do nothing."""

    def keep_statements_prepared(self) -> None:
        """Lets this thread's connection, for the rest of its session, keep the
        statements it repeats prepared on the server (parsed and planned once, not
        at every run). Only for a connection that is a session of its own: behind
        a pooler in transaction mode a prepared statement exists only on the server
        connection that made it. A threshold the connection's own settings already
        chose is kept. Drivers whose vendor has nothing to gain do nothing."""

    def wake_channel(self) -> WakeChannel | None:
        """The notifications committed publishes send (``LISTEN``), or ``None``
        when the vendor has none: a waiter then watches :meth:`change_counter`
        (or polls, :attr:`polls_for_work`)."""
        return None

    #: Whether an idle worker finds work published by other processes only by asking
    #: the queue at an interval (``LATER["WORKER_POLL_INTERVAL"]``): the vendor has
    #: neither notifications across processes nor a cheap change counter. Its wake
    #: channel, if any, carries this process's commits alone.
    polls_for_work: ClassVar[bool] = False

    def bound_lock_waits(self) -> None:
        """Lets this thread's connection, for the rest of its session, wait only
        briefly for a row lock another transaction holds: a worker's turn that times
        out is tried again (``worker.conflicts``) rather than stalling every job of
        the process. Drivers whose statements never wait on row locks do nothing."""

    def lock_conflict(self, error: BaseException) -> str | None:
        """``"deadlock"`` or ``"lock_wait"`` when ``error`` is a transaction that lost
        a lock conflict with another one and may simply run again, else ``None``."""
        return None

    def change_counter(self) -> int:
        """A number that changes whenever another connection commits, read on this
        thread's connection; only drivers without a :meth:`wake_channel` have one."""
        raise NotImplementedError(f"the {self.vendor} driver has no change counter")


def as_bytes(value: Any) -> Any:
    """Blob columns come back as ``bytes`` (SQLite) or ``memoryview`` (PostgreSQL)."""
    return bytes(value) if value is not None else value
