"""Jobs by the ten thousand for the tests whose subject is a big table (what the
promotion or a pass does *not* read): one job enqueued through the API, then every
row enqueue wrote for it copied under new job ids, set-based.

100,000 jobs through ``enqueue_many`` took 10-12 s a database, most of it building
and encoding records in Python; their copies take 1-2 s (PostgreSQL: ``COPY``;
SQLite: staged in a temporary table, then one ``INSERT ... SELECT``; MySQL/MariaDB:
multi-row ``INSERT``s). A copy's rows
are its original's with the job id replaced in every text and binary column (the
record's key and msgpack value, the schedule key, the index row, the queue message,
a range member): what the same ``enqueue_many`` call writes for a job of the same
arguments, which ``tests/engine/test_copies.py`` checks against a real one. The
counters follow through the tables' triggers, as for an enqueue; the per-minute
metrics of the enqueue's moves do not count the copies.
"""

from __future__ import annotations

from typing import Any

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from later_django.core.records import new_job_ids

#: Columns the database numbers itself (the queue's and the ranges' ``sequence``).
#: Columns it computes (MySQL's generated hashes) are left out as well.
_NUMBERED = frozenset({"AutoField", "BigAutoField", "SmallAutoField"})
_TEXT = frozenset({"CharField", "TextField"})
_BINARY = frozenset({"BinaryField"})
#: Rows per ``INSERT`` on MySQL/MariaDB (a statement of a few hundred kB).
_MYSQL_ROWS = 1_000


def copy_job(alias: str, job_id: str, count: int) -> list[str]:
    """Writes ``count`` copies of job ``job_id`` (every row of the ``later_`` tables
    that holds its id, but the database's own numbering) in one transaction; returns
    their ids, new ULIDs in ascending order."""
    connection = connections[alias]
    ids = new_job_ids(count)
    as_bytes = [new_id.encode() for new_id in ids]
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        for table, columns, rows in rows_of_job(alias, job_id):
            copies = []
            for row in rows:
                # The values that hold the id, split around it (a msgpack record holds
                # it as a string of fixed length: the copy's id is as long).
                held = [
                    (position, value.split(_as(value, job_id)), isinstance(value, bytes))
                    for position, value in enumerate(row)
                    if isinstance(value, str | bytes) and _as(value, job_id) in value
                ]
                for new_id, new_bytes in zip(ids, as_bytes, strict=True):
                    copy = list(row)
                    for position, parts, binary in held:
                        copy[position] = (new_bytes if binary else new_id).join(parts)
                    copies.append(copy)
            _insert(connection, cursor, table, columns, copies)
    return ids


def rows_of_job(alias: str, job_id: str) -> list[tuple[str, list[str], list[tuple[Any, ...]]]]:
    """Every ``later_`` table's rows that hold ``job_id`` in a text or binary
    column: ``(table, columns, rows)`` per table with such rows, the columns the
    database numbers itself left out."""
    connection = connections[alias]
    introspection = connection.introspection
    found = []
    with connection.cursor() as cursor:
        for table in sorted(introspection.table_names(cursor)):
            if not table.startswith("later_"):
                continue
            kinds = {
                column.name: introspection.get_field_type(column.type_code, column)
                for column in introspection.get_table_description(cursor, table)
                # MySQL's generated columns (a hash the server computes) take no value.
                if "GENERATED" not in (getattr(column, "extra", None) or "").upper()
            }
            columns = [name for name, kind in kinds.items() if kind not in _NUMBERED]
            holds, params = _holds(connection, kinds, job_id)
            if not holds:
                continue
            names = ", ".join(connection.ops.quote_name(name) for name in columns)
            cursor.execute(f"SELECT {names} FROM {table} WHERE {' OR '.join(holds)}", params)
            rows = [tuple(_plain(value) for value in row) for row in cursor.fetchall()]
            if rows:
                found.append((table, columns, rows))
    return found


def _holds(
    connection: BaseDatabaseWrapper, kinds: dict[str, str], job_id: str
) -> tuple[list[str], list[Any]]:
    """Conditions (OR-ed) that a row holds ``job_id`` in one of its text or binary
    columns, and their parameters."""
    holds: list[str] = []
    params: list[Any] = []
    for column, kind in kinds.items():
        name = connection.ops.quote_name(column)
        if kind in _TEXT:
            holds.append(f"{name} LIKE %s")
            params.append(f"%{job_id}%")
        elif kind in _BINARY:
            if connection.vendor == "postgresql":
                holds.append(f"position(%s::bytea in {name}) > 0")
            else:
                holds.append(f"instr({name}, %s) > 0")
            params.append(job_id.encode())
    return holds, params


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def _as(value: str | bytes, text: str) -> Any:
    """``text`` (ASCII) as a str or as bytes, as ``value`` is."""
    return text if isinstance(value, str) else text.encode()


def _insert(
    connection: BaseDatabaseWrapper,
    cursor: Any,
    table: str,
    columns: list[str],
    rows: list[list[Any]],
) -> None:
    """``rows`` into ``table`` in one statement. PostgreSQL: ``COPY``. SQLite: through
    an unindexed temporary table (``executemany`` there, then one ``INSERT ...
    SELECT``): an ``executemany`` into the table itself starts its row trigger for
    every row (the index's counter trigger: 3 s per 100,000 rows, against 0.5 s).
    MySQL/MariaDB: multi-row ``INSERT``s of :data:`_MYSQL_ROWS` rows, a bytes value as
    ``_binary`` (mysqlclient binds it as a string of the connection's character set).
    The table's triggers fire either way, as for an enqueue's ``INSERT``."""
    names = ", ".join(connection.ops.quote_name(name) for name in columns)
    if connection.vendor == "mysql":
        for start in range(0, len(rows), _MYSQL_ROWS):
            chunk = rows[start : start + _MYSQL_ROWS]
            groups = ", ".join(
                "(" + ", ".join("_binary %s" if isinstance(v, bytes) else "%s" for v in row) + ")"
                for row in chunk
            )
            params = [value for row in chunk for value in row]
            cursor.execute(f"INSERT INTO {table} ({names}) VALUES {groups}", params)
    elif connection.vendor == "postgresql":
        with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    else:
        marks = ", ".join(["%s"] * len(columns))
        cursor.execute(f"CREATE TEMP TABLE copies_staged AS SELECT {names} FROM {table} WHERE 0")
        cursor.executemany(f"INSERT INTO copies_staged VALUES ({marks})", rows)
        cursor.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM copies_staged")
        cursor.execute("DROP TABLE copies_staged")
