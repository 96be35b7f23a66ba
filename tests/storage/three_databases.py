"""For the storage test modules that run on MariaDB too (issue 36: the MySQL driver has
statements for some stores only, so the shared ``db_alias`` leaves MariaDB out). Such a
module imports :func:`db_alias` (its own fixture over the three databases), sets
``USES_MARIADB = True`` (tests/conftest.py keeps the alias in ``"__all__"`` for it) and
spells the ``key`` column with :func:`key_column`."""

from __future__ import annotations

import pytest
from django.db import connections

from later_django.storage.stores import driver_for
from tests.conftest import ALIASES, OWN_ALIASES, use_database


@pytest.fixture(params=[*ALIASES, *OWN_ALIASES])
def db_alias(request: pytest.FixtureRequest) -> str:
    """SQLite, PostgreSQL and MariaDB (each skipped only when unreachable)."""
    return use_database(request, request.param)


def key_column(alias: str) -> str:
    """The ``key`` column as the vendor spells it (a reserved word on MySQL)."""
    return connections[alias].ops.quote_name("key")


def needs_statements(alias: str, *bases: type) -> None:
    """Skips the running test on ``alias`` while its driver has no statements for one of
    the store query classes ``bases`` (issue 36: the MySQL driver is written store by
    store); once they are registered the test runs there like anywhere else."""
    driver = driver_for(alias)
    missing = [base.__name__ for base in bases if base not in driver.query_classes]
    if missing:
        pytest.skip(
            f"the {driver.vendor} driver has no statements for {', '.join(missing)} yet (issue 36)"
        )
