"""The MySQL/MariaDB driver's own shapes (issue 36), on the ``mariadb`` alias: every
store is built though only some stores have statements, the answers that stand in for
``RETURNING`` (the matched rows Django's ``CLIENT_FOUND_ROWS`` reports, the
``LAST_INSERT_ID`` flag), and a batch larger than the server's packet."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, DataError, connections

from later_django.storage.driver import Returning
from later_django.storage.mysql import MysqlDriver
from later_django.storage.queries.topics import TopicQueries
from later_django.storage.stores import stores_for
from later_django.storage.types import Delete, Set
from tests.conftest import use_database

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
_KEY = "`key`"


@pytest.fixture
def mariadb(request: pytest.FixtureRequest) -> str:
    return use_database(request, "mariadb")


def test_every_store_has_its_statements(mariadb: str) -> None:
    from later_django.storage.queries import STORE_QUERY_MODULES

    stores = stores_for(mariadb)
    assert isinstance(stores.driver, MysqlDriver)
    assert len(MysqlDriver.query_classes) == len(STORE_QUERY_MODULES)
    stores.kv.set("k", b"v")
    assert stores.kv.get("k") == b"v"


def test_an_update_that_changes_nothing_still_counts_its_row(mariadb: str) -> None:
    """replace_if reads ROW_COUNT(): Django connects with CLIENT_FOUND_ROWS, so a
    matched row counts even when the new value equals the old one."""
    kv = stores_for(mariadb).kv
    kv.set("same", b"v")
    assert kv.replace_if("same", b"v", b"v") is True
    assert kv.replace_if("same", b"other", b"v") is False
    assert kv.get("same") == b"v"


def test_set_if_absent_answers_from_its_own_statement_not_an_earlier_one(mariadb: str) -> None:
    """The LAST_INSERT_ID flag is set by every outcome of the statement: a 1 left by
    an earlier creation never reads as a win for a refused one."""
    kv = stores_for(mariadb).kv
    assert kv.set_if_absent("a", b"1") is True
    assert kv.set_if_absent("a", b"2") is False
    assert kv.set_if_absent("b", b"1") is True
    assert kv.set_if_absent("b", b"2") is False
    assert (kv.get("a"), kv.get("b")) == (b"1", b"1")


def test_a_returning_statement_is_refused_by_a_driver_that_runs_it_as_one(
    mariadb: str,
) -> None:
    """Run as text by a plain cursor (which mysqlclient lets run several statements),
    the server refuses it before its writes; the driver's cursor runs writes, then read."""
    statement = Returning(
        [f"INSERT INTO later_storage ({_KEY}, value, date_created) VALUES ('w', 'x', 0)"],
        "SELECT 2 FROM DUAL",
    )
    with connections[mariadb].cursor() as cursor, pytest.raises(DatabaseError):
        cursor.execute(str(statement))
    assert stores_for(mariadb).kv.get("w") is None
    with stores_for(mariadb).driver.cursor() as cursor:
        cursor.execute(statement)
        assert cursor.fetchall() == ((2,),)
    assert stores_for(mariadb).kv.get("w") == b"x"


def test_a_batch_larger_than_the_packet_is_written_in_several_statements_at_once(
    mariadb: str,
) -> None:
    driver = stores_for(mariadb).driver
    assert isinstance(driver, MysqlDriver)
    value_size = driver.packet_limit() // 8
    sets = [Set(f"big-{n:02}", bytes([n]) * value_size) for n in range(12)]
    stores_for(mariadb).kv.apply(sets)
    found = stores_for(mariadb).kv.get_many([op.key for op in sets])
    assert {key: len(value) for key, value in found.items()} == {op.key: value_size for op in sets}
    assert found["big-07"] == bytes([7]) * value_size


def test_a_locking_read_binds_the_rows_it_locked_and_without_any_nothing_else_runs(
    mariadb: str,
) -> None:
    """``Returning.lock``: the first column of the locking read's rows is bound as the
    list ``locked`` for the writes and the read; no row locked, no write and no row."""
    kv = stores_for(mariadb).kv
    kv.apply([Set("lock-a", b"1"), Set("lock-b", b"2"), Set("other", b"3")])
    keys = "JSON_TABLE(%(locked)s, '$[*]' COLUMNS (v VARCHAR(500) PATH '$')) AS j"
    statement = Returning(
        [
            f"UPDATE {keys} STRAIGHT_JOIN later_storage AS s ON s.{_KEY} = j.v "
            "SET s.value = 'locked'",
            f"INSERT INTO later_storage ({_KEY}, value, date_created) VALUES ('marker', 'x', 0)",
        ],
        f"SELECT j.v FROM {keys} ORDER BY j.v",
        lock=f"SELECT {_KEY} FROM later_storage WHERE {_KEY} LIKE %(like)s ORDER BY {_KEY} "
        "FOR UPDATE SKIP LOCKED",
    )
    driver = stores_for(mariadb).driver
    assert driver.fetch_all(statement, {"like": "lock-%"}) == [("lock-a",), ("lock-b",)]
    assert kv.get_many(["lock-a", "lock-b", "other", "marker"]) == {
        "lock-a": b"locked",
        "lock-b": b"locked",
        "other": b"3",
        "marker": b"x",
    }
    kv.apply([Delete("marker")])
    assert driver.fetch_all(statement, {"like": "none-%"}) == []
    assert driver.execute(statement, {"like": "none-%"}) == 0
    assert kv.get("marker") is None, "no row locked: the writes did not run"


def test_a_topic_insert_says_whether_it_wrote_the_row_and_refuses_a_too_long_topic(
    mariadb: str,
) -> None:
    """``insert_if_absent`` answers from its own ``LAST_INSERT_ID`` flag (a kept row
    counts one under ``CLIENT_FOUND_ROWS``; an earlier win left on the connection
    does not leak), and a topic too long for its column is an error, not a truncated
    row (``INSERT IGNORE`` would have stored one)."""
    stores = stores_for(mariadb)
    driver, q = stores.driver, stores.driver.queries(TopicQueries)
    params = {"namespace": "ns", "topic": "t", "partitions": 4, "now": 1_000}
    assert driver.execute(q.insert_if_absent, params) == 1
    assert stores.kv.set_if_absent("flag", b"1") is True  # LAST_INSERT_ID() is 1 now
    assert driver.execute(q.insert_if_absent, {**params, "partitions": 9}) == 0
    assert stores.topics.stored_partitions("ns", "t") == 4
    assert stores.topics.record_if_absent("ns", "u", 2) == 2
    assert stores.topics.record_if_absent("ns", "u", 5) == 2
    with pytest.raises(DataError):
        stores.topics.record_if_absent("ns", "x" * 201, 3)
    assert stores.dashboard.topics("ns") == [("t", 4), ("u", 2)]
