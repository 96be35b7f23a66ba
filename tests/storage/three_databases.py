"""For the storage test modules that run on MariaDB too (issue 36: the MySQL driver has
statements for some stores only, so the shared ``db_alias`` leaves MariaDB out). Such a
module imports :func:`db_alias` (its own fixture over the three databases), sets
``USES_MARIADB = True`` (tests/conftest.py keeps the alias in ``"__all__"`` for it) and
spells the ``key`` column with :func:`key_column`."""

from __future__ import annotations

import pytest
from django.db import connections

from tests.conftest import ALIASES, OWN_ALIASES, use_database


@pytest.fixture(params=[*ALIASES, *OWN_ALIASES])
def db_alias(request: pytest.FixtureRequest) -> str:
    """SQLite, PostgreSQL and MariaDB (each skipped only when unreachable)."""
    return use_database(request, request.param)


def key_column(alias: str) -> str:
    """The ``key`` column as the vendor spells it (a reserved word on MySQL)."""
    return connections[alias].ops.quote_name("key")
