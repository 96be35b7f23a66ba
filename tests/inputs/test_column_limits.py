"""A value longer than its column is refused by the server, never stored cut (issue 3's
"a clear error, never a silent truncation"), on the databases that enforce lengths:
PostgreSQL, and MariaDB/MySQL in strict mode (``STRICT_TRANS_TABLES`` or
``STRICT_ALL_TABLES`` in ``sql_mode``; without it the server cuts the value and only
warns). later_django's inputs refuse such values before any write (the properties
beside this file); this is the server's line behind them, and the proof that the
MariaDB lane runs in strict mode (SQLite enforces no length: left out).
"""

from __future__ import annotations

import pytest
from django.db import DataError, connections, transaction

from later_django.storage.stores import stores_for
from tests.inputs.conftest import compared_with_sqlite

pytestmark = [pytest.mark.django_db(transaction=True, databases="__all__"), compared_with_sqlite]

#: ``later_topic.topic`` holds 200 characters (``models.base.NAME_LENGTH``).
TOO_LONG = "x" * 201


def test_the_connection_refuses_data_too_long(compared: str) -> None:
    connection = connections[compared]
    if connection.vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@SESSION.sql_mode")
            (mode,) = cursor.fetchone()
        assert {"STRICT_TRANS_TABLES", "STRICT_ALL_TABLES"} & set(mode.split(",")), mode
    stores = stores_for(compared)
    with pytest.raises(DataError), transaction.atomic(using=compared):
        stores.topics.record_if_absent("ns", TOO_LONG, 3)
    assert stores.dashboard.topics("ns") == []
    with connections[compared].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_topic")
        assert cursor.fetchone() == (0,)
