"""The MySQL/MariaDB driver's own shapes (issue 36), on the ``mariadb`` alias: every
store is built though only the kv store has statements, the answers that stand in for
``RETURNING`` (the matched rows Django's ``CLIENT_FOUND_ROWS`` reports, the
``LAST_INSERT_ID`` flag), and a batch larger than the server's packet."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connections

from later_django.storage.driver import Returning
from later_django.storage.mysql import MysqlDriver
from later_django.storage.stores import stores_for
from later_django.storage.types import Set
from tests.conftest import use_database

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
_KEY = "`key`"


@pytest.fixture
def mariadb(request: pytest.FixtureRequest) -> str:
    return use_database(request, "mariadb")


def test_every_store_is_built_and_a_store_without_statements_fails_at_first_use(
    mariadb: str,
) -> None:
    stores = stores_for(mariadb)
    assert isinstance(stores.driver, MysqlDriver)
    stores.kv.set("k", b"v")
    assert stores.kv.get("k") == b"v"
    with pytest.raises(LookupError, match="mysql driver has no statements for QueueQueries"):
        stores.queue.has_ready("ns", None)
    with pytest.raises(LookupError, match="mysql driver has no statements for TopicQueries"):
        stores.topics.stored_partitions("ns", "events")


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
