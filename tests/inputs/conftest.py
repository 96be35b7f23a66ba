"""The bad-input properties compare each answer on SQLite with another database's:
PostgreSQL in the main lane, MariaDB in the MariaDB lane (``LATER_TEST_LANE=mariadb``,
issue 36), so every outside value gets the same answer on the three vendors.

A property test takes ``compared`` (``db_alias`` set to :data:`COMPARED` by
:data:`compared_with_sqlite`, so the lane keeps it) and ``reference`` (SQLite)."""

from __future__ import annotations

import pytest

from tests.conftest import MARIADB_LANE, clear_counters

#: SQLite's alias: the reference every answer is compared with.
REFERENCE = "default"
#: The name (a ``db_alias`` parameter) of the database compared with SQLite.
COMPARED = "mariadb" if MARIADB_LANE else "postgres"
#: Marks a property test (or module) as one comparison of SQLite with :data:`COMPARED`.
compared_with_sqlite = pytest.mark.parametrize("db_alias", [COMPARED], indirect=True)


@pytest.fixture
def reference() -> str:
    """SQLite's alias, its counters emptied as ``db_alias`` empties the compared one's."""
    clear_counters(REFERENCE)
    return REFERENCE


@pytest.fixture
def compared(db_alias: str) -> str:
    """The alias compared with SQLite (skipped, as ``db_alias`` is, when unreachable)."""
    return db_alias
