"""The PostgreSQL driver keeps one psycopg cursor per connection for its statements
(``_KeptCursor``): made once, not closed at the end of each ``with`` block; a
statement inside another's block gets its own; a large result is not kept; a
replaced connection gets a new one; while Django logs queries nothing is kept."""

from __future__ import annotations

import threading

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from later_django.storage.postgres import KEEP_RESULT_ROWS
from later_django.storage.stores import stores_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def _library_cursor(driver):  # type: ignore[no-untyped-def]
    with driver.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.cursor


def test_statements_share_one_cursor_of_the_connection(postgres_alias: str) -> None:
    driver = stores_for(postgres_alias).driver
    first = _library_cursor(driver)
    assert driver.fetch_one("SELECT 2") == (2,)
    assert driver.execute("SELECT 3") == 1
    assert _library_cursor(driver) is first
    assert not first.closed


def test_a_statement_inside_another_block_gets_its_own_cursor(postgres_alias: str) -> None:
    driver = stores_for(postgres_alias).driver
    with driver.cursor() as outer:
        outer.execute("SELECT generate_series(1, 3)")
        assert driver.fetch_all("SELECT 42") == [(42,)]
        # The outer result is intact: the inner statement ran on another cursor.
        assert outer.fetchall() == [(1,), (2,), (3,)]
    assert not outer.cursor.closed
    assert _library_cursor(driver) is outer.cursor


def test_a_large_result_is_not_kept(postgres_alias: str) -> None:
    driver = stores_for(postgres_alias).driver
    first = _library_cursor(driver)
    rows = driver.fetch_all("SELECT generate_series(1, %(n)s)", {"n": KEEP_RESULT_ROWS + 1})
    assert len(rows) == KEEP_RESULT_ROWS + 1
    assert first.closed
    second = _library_cursor(driver)
    assert second is not first
    assert _library_cursor(driver) is second


def test_a_replaced_connection_gets_a_new_cursor(postgres_alias: str) -> None:
    driver = stores_for(postgres_alias).driver
    first = _library_cursor(driver)
    connections[postgres_alias].close()
    second = _library_cursor(driver)
    assert second is not first
    assert second.connection is connections[postgres_alias].connection
    assert driver.fetch_one("SELECT 5") == (5,)


def test_while_django_logs_queries_every_statement_has_a_logged_cursor(
    postgres_alias: str,
) -> None:
    driver = stores_for(postgres_alias).driver
    kept = _library_cursor(driver)
    with CaptureQueriesContext(connections[postgres_alias]) as captured:
        assert driver.fetch_one("SELECT 7") == (7,)
        assert _library_cursor(driver) is not kept
    assert [query["sql"] for query in captured.captured_queries] == ["SELECT 7", "SELECT 1"]
    assert _library_cursor(driver) is kept


def test_each_thread_keeps_its_own(postgres_alias: str) -> None:
    driver = stores_for(postgres_alias).driver
    mine, theirs = _library_cursor(driver), []

    def other_thread() -> None:
        try:
            theirs.append(_library_cursor(driver))
        finally:
            connections.close_all()

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert theirs and theirs[0] is not mine
    assert _library_cursor(driver) is mine
