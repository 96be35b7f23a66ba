"""A database error that retrying cannot cure stops a real ``later_worker`` with a clear
message and :data:`~later_django.worker.process.EXIT_NOT_TRANSIENT`, also with
``--burst`` and under a supervisor; a database that is away is still retried
(issue 38, item 3; the restarts themselves: :mod:`tests.worker.test_faults`)."""

from __future__ import annotations

import sqlite3

import pytest
from django.db import DatabaseError, connections

from later_django.worker.process import EXIT_DATABASE_AWAY, EXIT_NOT_TRANSIENT, is_transient
from tests.browser.example_site import free_port
from tests.worker.test_worker_process import (
    START_SECONDS,
    Workers,
    database_settings,
    worker_rows,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

MODULE = "tests.worker.out_of_range_worker"
#: What each database says of a concurrency of 2**63 in the worker row.
REFUSALS = {
    "default": "too large to convert to SQLite INTEGER",
    "postgres": "out of range",
    "mariadb": "Out of range value for column 'concurrency'",
}


def assert_stopped_clearly(log: str, alias: str) -> None:
    """The log names the error and why the worker stopped; no traceback, no retry."""
    assert "retrying cannot cure this error" in log, log
    assert REFUSALS[alias] in log, log
    assert f"exit status {EXIT_NOT_TRANSIENT}" in log, log
    assert "Traceback" not in log, log
    assert "retrying in" not in log, log


@pytest.mark.parametrize("burst", [True, False], ids=["burst", "no-burst"])
def test_a_worker_stops_on_a_value_the_database_refuses_instead_of_retrying(
    alias: str, workers: Workers, burst: bool
) -> None:
    worker = workers.start(alias, *(["--burst"] if burst else []), module=MODULE)
    assert worker.wait_exit(START_SECONDS) == EXIT_NOT_TRANSIENT, worker.describe()
    assert_stopped_clearly(worker.log(), alias)
    assert worker_rows(alias) == []


def test_a_supervisor_stops_every_child_and_replaces_none(alias: str, workers: Workers) -> None:
    worker = workers.start(alias, "--processes", "2", module=MODULE)
    assert worker.wait_exit(START_SECONDS) == EXIT_NOT_TRANSIENT, worker.describe()
    log = worker.log()
    assert_stopped_clearly(log, alias)
    assert "stopping the others, replacing none" in log, log
    assert "starting another" not in log, log


def test_a_worker_within_the_columns_runs_its_burst_and_exits_0(
    alias: str, workers: Workers
) -> None:
    """The same module with a concurrency the column holds: the stop above is the
    value's doing, not the module's."""
    worker = workers.start(
        alias, "--burst", module=MODULE, environment={"LATER_FORCED_CONCURRENCY": "3"}
    )
    assert worker.wait_exit(START_SECONDS) == 0, worker.describe()


def away(alias: str, tmp_path) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """``alias``'s connection settings, with a database that never answers: a port
    nothing listens on, or an SQLite file in a directory that does not exist."""
    database = database_settings(alias)
    if connections[alias].vendor in ("postgresql", "mysql"):
        database["PORT"] = str(free_port())
    else:
        database["NAME"] = str(tmp_path / "no-such-directory" / "db.sqlite3")
    return database


def test_a_burst_worker_gives_up_on_a_database_that_does_not_answer(
    alias: str, workers: Workers, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """``--burst`` always ends: a database away for ``--burst-patience`` seconds ends
    it with :data:`EXIT_DATABASE_AWAY` and a line saying why, after retrying."""
    worker = workers.start(
        alias, "--burst", "--burst-patience", "1", database=away(alias, tmp_path)
    )
    assert worker.wait_exit(START_SECONDS) == EXIT_DATABASE_AWAY, worker.describe()
    log = worker.log()
    assert "retrying in" in log, log
    assert "gave up: the database has not answered for" in log, log
    assert f"(exit status {EXIT_DATABASE_AWAY})" in log, log
    assert "Traceback" not in log, log


def raised(alias: str, statement: str, parameters: list[object]) -> BaseException:
    """What ``statement`` raises on ``alias``'s own connection."""
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute(statement, parameters)
    except (DatabaseError, OverflowError) as error:
        return error
    finally:
        connections[alias].close()
    raise AssertionError(f"{statement} raised nothing")


def test_a_value_out_of_range_is_not_transient(db_alias: str) -> None:
    vendor = connections[db_alias].vendor
    if vendor == "postgresql":
        error = raised(db_alias, "SELECT %s::integer", [2**31])
    elif vendor == "mysql":
        # MySQL refuses the value where a column is to hold it (strict mode, 1264), as
        # in the worker row above; a SELECT gives the number back as it came.
        with connections[db_alias].cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE later_test_narrow (n INTEGER)")
        error = raised(db_alias, "INSERT INTO later_test_narrow (n) VALUES (%s)", [2**63])
    else:
        error = raised(db_alias, "SELECT %s", [2**63])
    assert not is_transient(error), repr(error)


def test_a_missing_table_on_postgresql_is_not_transient(postgres_alias: str) -> None:
    assert not is_transient(raised(postgres_alias, "SELECT * FROM later_no_such_table", []))


def test_a_lost_connection_and_a_held_lock_are_transient(db_alias: str) -> None:
    connection = connections[db_alias]
    if connection.vendor == "postgresql":
        error = raised(db_alias, "SELECT pg_terminate_backend(pg_backend_pid())", [])
    elif connection.vendor == "mysql":
        error = raised(db_alias, "KILL CONNECTION_ID()", [])
        assert is_transient(error), repr(error)
        error = held_row_lock_on_mysql(db_alias)
    else:
        locker = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            connection.ensure_connection()
            connection.connection.execute("PRAGMA busy_timeout = 50")
            error = raised(db_alias, "DELETE FROM later_worker", [])
        finally:
            locker.execute("ROLLBACK")
            locker.close()
    assert is_transient(error), repr(error)


def held_row_lock_on_mysql(alias: str) -> BaseException:
    """What a write waiting for a row another connection holds raises on MySQL once its
    lock wait times out (1205; the worker's sessions wait 3 s)."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "INSERT INTO later_stage_counts (namespace, stage, shard, count) "
            "VALUES ('held', 'enqueued', 0, 0)"
        )
    holder = connections.create_connection(alias)
    try:
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute(
                "SELECT count FROM later_stage_counts WHERE namespace = 'held' FOR UPDATE"
            )
        with connections[alias].cursor() as cursor:
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        return raised(alias, "UPDATE later_stage_counts SET count = 1 WHERE namespace = 'held'", [])
    finally:
        holder.rollback()
        holder.close()


def test_a_prepared_statement_missing_or_doubled_on_postgresql_is_transient(
    postgres_alias: str,
) -> None:
    """What a pooler in transaction mode does to a worker's prepared statements (a new
    connection may cure it): retried, as before."""
    assert is_transient(raised(postgres_alias, "DEALLOCATE later_no_such_statement", []))
    doubled = "PREPARE later_twice AS SELECT 1; PREPARE later_twice AS SELECT 1"
    assert is_transient(raised(postgres_alias, doubled, []))
