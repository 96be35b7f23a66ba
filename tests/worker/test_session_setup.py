"""The worker's main connection is set up once as its own session: asynchronous
commits and, on PostgreSQL, prepared statements (``LATER["WORKER_PREPARED_STATEMENTS"]``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from later_django.storage.postgres import WORKER_PREPARE_THRESHOLD
from later_django.worker.options import WorkerContext
from later_django.worker.runner import WorkerOptions
from later_django.worker.session import SessionSetup

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.fixture
def session() -> Iterator[Any]:
    """Builds a :class:`SessionSetup` under given ``LATER`` keys on an alias and sets
    it up; the connections are closed afterwards, so the next test gets fresh sessions."""

    def set_up(alias: str, **keys: Any) -> SessionSetup:
        with override_settings(LATER={"NAMESPACE": "default", "DATABASE": alias, **keys}):
            setup = SessionSetup(WorkerContext.create(WorkerOptions(queues=["default"])))
        setup.set_up()
        return setup

    try:
        yield set_up
    finally:
        connections.close_all()


def run_repeatedly(alias: str, times: int) -> None:
    """One of later_django's own statements, run ``times`` times through its driver."""
    from later_django.storage.stores import stores_for

    stores = stores_for(alias)
    for _ in range(times):
        stores.kv.get_many(["later:session-setup-probe"])


def prepared_statements(alias: str) -> int:
    """Statements prepared on the server in this connection's session."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        return int(cursor.fetchone()[0])


def test_a_workers_session_commits_asynchronously_and_keeps_its_statements_prepared(
    db_alias: str, vendor: str, session
) -> None:
    session(db_alias)
    run_repeatedly(db_alias, WORKER_PREPARE_THRESHOLD + 1)

    if vendor != "postgresql":
        return  # SQLite has neither setting: the set-up is a no-op that must not fail
    raw = connections[db_alias].connection
    assert raw.prepare_threshold == WORKER_PREPARE_THRESHOLD
    assert prepared_statements(db_alias) >= 1
    with connections[db_alias].cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("off",)


def test_prepared_statements_can_be_turned_off(postgres_alias: str, session) -> None:
    connections[postgres_alias].close()  # a fresh session, with nothing prepared yet
    session(postgres_alias, WORKER_PREPARED_STATEMENTS=False)
    run_repeatedly(postgres_alias, WORKER_PREPARE_THRESHOLD + 1)

    assert connections[postgres_alias].connection.prepare_threshold is None
    assert prepared_statements(postgres_alias) == 0


def test_a_threshold_from_djangos_options_is_kept(postgres_alias: str, session) -> None:
    connections[postgres_alias].ensure_connection()
    # What Django does with DATABASES[...]["OPTIONS"]["prepare_threshold"] = 50.
    connections[postgres_alias].connection.prepare_threshold = 50
    session(postgres_alias)

    assert connections[postgres_alias].connection.prepare_threshold == 50


def test_a_reconnected_session_is_set_up_again(postgres_alias: str, session) -> None:
    setup = session(postgres_alias)
    connections[postgres_alias].close()

    setup.set_up()

    assert connections[postgres_alias].connection.prepare_threshold == WORKER_PREPARE_THRESHOLD


def test_a_missing_prepared_statement_is_logged_with_its_likely_cause(
    db_alias: str, vendor: str
) -> None:
    """What a worker's prepared statements meet behind PgBouncer in transaction
    pooling; any other database error gets no hint."""
    from django.db import DatabaseError, transaction

    from later_django.worker.process import MISSING_PREPARED_STATEMENT_HINT, trouble_hint

    statement = "EXECUTE later_no_such_statement" if vendor == "postgresql" else "SELECT nope"
    with (
        pytest.raises(DatabaseError) as raised,
        transaction.atomic(using=db_alias),
        connections[db_alias].cursor() as cursor,
    ):
        cursor.execute(statement)

    expected = MISSING_PREPARED_STATEMENT_HINT if vendor == "postgresql" else ""
    assert trouble_hint(raised.value) == expected
    assert "LATER['WORKER_PREPARED_STATEMENTS'] = False" in MISSING_PREPARED_STATEMENT_HINT


def test_nothing_is_prepared_while_django_logs_queries(postgres_alias: str, session) -> None:
    """Django 5.2 logs a prepared statement's text as None (DEBUG's
    ``connection.queries``, ``CaptureQueriesContext``): while Django logs, the
    statements run unprepared and are logged as they are."""
    from django.test.utils import CaptureQueriesContext

    connections[postgres_alias].close()  # a fresh session, with nothing prepared yet
    session(postgres_alias)
    with CaptureQueriesContext(connections[postgres_alias]) as captured:
        run_repeatedly(postgres_alias, WORKER_PREPARE_THRESHOLD + 1)

    assert prepared_statements(postgres_alias) == 0
    logged = [query["sql"] for query in captured.captured_queries]
    assert len(logged) == WORKER_PREPARE_THRESHOLD + 1
    assert all(sql is not None and "later_storage" in sql for sql in logged), logged


@pytest.fixture
def mariadb(request: pytest.FixtureRequest) -> str:
    from tests.conftest import use_database

    return use_database(request, "mariadb")


#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py) for the test below.
USES_MARIADB = True


def test_a_workers_mariadb_session_waits_briefly_for_row_locks(mariadb: str, session) -> None:
    from later_django.storage.mysql import WORKER_LOCK_WAIT_SECONDS

    connections[mariadb].close()  # a fresh session, at the server's default
    session(mariadb)

    with connections[mariadb].cursor() as cursor:
        cursor.execute(
            "SELECT @@SESSION.innodb_lock_wait_timeout, @@GLOBAL.innodb_lock_wait_timeout"
        )
        session_wait, server_wait = cursor.fetchone()
    assert session_wait == WORKER_LOCK_WAIT_SECONDS < server_wait
