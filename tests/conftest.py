"""Fixtures that run each storage test against SQLite and PostgreSQL.

``db_alias`` is parametrized ``sqlite`` / ``postgres``. A ``postgres`` case is
skipped only when ``tests.settings`` found no server and
``LATER_REQUIRE_POSTGRES`` is unset (settings refuse to load otherwise).

Under pytest-xdist (``make test`` runs ``-n 2``) every worker process has its own
test databases: pytest-django suffixes the PostgreSQL test database with the worker
id (``test_later_django_gw0``), and each process's settings make their own temporary
SQLite directory.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from tests import lanes

#: ``LATER_TEST_LANE=mariadb``: the MariaDB lane. Every test parametrized over the
#: databases (``db_alias``) runs on MariaDB alone, and every other test is left to the
#: main lane (deselected here): ``make test-mariadb`` (docs/testing.md).
MARIADB_LANE = os.environ.get("LATER_TEST_LANE") == "mariadb"
ALIASES = {"mariadb": "mariadb"} if MARIADB_LANE else {"sqlite": "default", "postgres": "postgres"}
#: Databases that only some modules run on in the main lane (their own
#: parametrisation, never ``db_alias``'s): MariaDB's own cases (``USES_MARIADB``).
OWN_ALIASES = {} if MARIADB_LANE else {"mariadb": "mariadb"}
#: The user property naming the database a test ran on ("sqlite"/"postgres"), for the
#: summary; a property travels with the report from an xdist worker to the controller.
DATABASE_PROPERTY = "later_database"


def pytest_configure(config: pytest.Config) -> None:
    """A run started as a background job of a non-interactive shell (``make test &``)
    inherits SIGINT ignored, and so would every process it starts: the dev server
    the browser tests stop with SIGINT then never exits. A handler (not an ignore) is
    reset to the default in a child, so Python's own handler restores that."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    lanes.pytest_configure(config)


#: Until the MariaDB driver exists (issue 36), ``databases="__all__"`` means SQLite and
#: PostgreSQL: flushing the MariaDB test database after every transactional test cost
#: ``tests/engine`` a fifth of its time (73.5 s against 61.2 s, ``-n 4``) for no test
#: of it. A module that tests MariaDB says so with ``USES_MARIADB = True``.
MARIADB_ALIAS = "mariadb"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The lanes' marks and order (``tests.lanes``), then MariaDB only where asked."""
    lanes.pytest_collection_modifyitems(config, items)
    if MARIADB_LANE:
        _only_database_cases(config, items)
        return
    _mariadb_where_used(items)


def _only_database_cases(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The MariaDB lane keeps the cases parametrized over the databases."""
    kept, left = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        (kept if "db_alias" in params else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def _mariadb_where_used(items: list[pytest.Item]) -> None:
    if MARIADB_ALIAS not in settings.DATABASES:
        return
    others = [alias for alias in settings.DATABASES if alias != MARIADB_ALIAS]
    for item in items:
        marker = item.get_closest_marker("django_db")
        if marker is None or marker.kwargs.get("databases") != "__all__":
            continue
        if getattr(getattr(item, "module", None), "USES_MARIADB", False):
            continue
        item.add_marker(
            pytest.mark.django_db(*marker.args, **{**marker.kwargs, "databases": others}),
            append=False,
        )


@pytest.fixture(scope="session", autouse=True)
def _mariadb_server_known(django_db_blocker: Any) -> None:
    """The MariaDB server's version, read once at the session's start: Django 6's plain
    ``check`` validates the models' fields against every alias (``list(connections)``),
    and on MySQL that asks the server its version, which a test not marked for
    ``mariadb`` may not do (it passed or failed by which test had connected first).
    Django keeps the answer on the alias's connection; the connection is closed, so
    the test database's setup opens its own."""
    if MARIADB_ALIAS in settings.DATABASES:
        with django_db_blocker.unblock():
            connections[MARIADB_ALIAS].mysql_server_data  # noqa: B018 (cached by Django)
            connections[MARIADB_ALIAS].close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    sqlite = settings.DATABASES["default"]["TEST"]["NAME"]
    if "postgres" in settings.DATABASES:
        test_name = settings.DATABASES["postgres"]["TEST"]["NAME"]
        if getattr(config.option, "numprocesses", None):
            test_name += "_gw<n>, one per xdist worker"
        pg = f"PostgreSQL {settings.POSTGRES_URL} (test database {test_name})"
    else:
        pg = f"PostgreSQL SKIPPED ({settings.POSTGRES_PROBLEM})"
    if getattr(config.option, "numprocesses", None):
        sqlite = "in a temporary directory per xdist worker"
    if MARIADB_LANE:
        return [f"later_django databases: the MariaDB lane, MariaDB {settings.MARIADB_URL} alone"]
    if "mariadb" in settings.DATABASES:
        mariadb = (
            f"MariaDB {settings.MARIADB_URL} (the modules with their own MariaDB cases; "
            "the whole driver in the MariaDB lane, make test-mariadb)"
        )
    else:
        mariadb = f"MariaDB SKIPPED ({settings.MARIADB_PROBLEM})"
    return [f"later_django databases: SQLite file {sqlite}; {pg}; {mariadb}"]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """States how many test cases ran on each database, so a run says it covered both."""
    counts = {name: {"passed": 0, "failed": 0, "skipped": 0} for name in ALIASES}
    counts.update({name: {"passed": 0, "failed": 0, "skipped": 0} for name in OWN_ALIASES})
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            name = dict(getattr(report, "user_properties", ())).get(DATABASE_PROPERTY)
            if name is not None and getattr(report, "when", "call") in ("call", "setup"):
                if outcome == "passed" and report.when != "call":
                    continue
                counts[name]["failed" if outcome == "error" else outcome] += 1
    summary = "; ".join(
        f"{name}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"
        for name, c in counts.items()
    )
    terminalreporter.write_line(f"later_django database cases: {summary}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Drops metric samples still in memory (their test databases are gone) and
    removes the temporary SQLite directory the settings created for this run."""
    from later_django.engine import metrics

    metrics.accumulator.take()
    if settings.SQLITE_DIRECTORY_IS_TEMPORARY:
        shutil.rmtree(settings.SQLITE_DIRECTORY, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def fast_flush() -> None:
    """The flush between transactional tests empties only what holds rows
    (:mod:`tests.fast_flush`)."""
    from tests import fast_flush

    fast_flush.install()


@pytest.fixture(params=list(ALIASES))
def db_alias(request: pytest.FixtureRequest) -> str:
    """The database alias of this case: ``default`` (SQLite) or ``postgres``."""
    return use_database(request, request.param)


def use_database(request: pytest.FixtureRequest, name: str) -> str:
    """The alias of database ``name`` for this test: records it for the summary,
    skips when PostgreSQL is unreachable, and starts the test with empty counters."""
    request.node.user_properties.append((DATABASE_PROPERTY, name))
    alias = ALIASES[name] if name in ALIASES else OWN_ALIASES[name]
    if alias not in settings.DATABASES:
        if alias == MARIADB_ALIAS:
            pytest.skip(f"MariaDB unreachable: {settings.MARIADB_PROBLEM}")
        pytest.skip(f"PostgreSQL unreachable: {settings.POSTGRES_PROBLEM}")
    if request.node.get_closest_marker("django_db"):
        clear_counters(alias)
    return alias


def clear_counters(alias: str) -> None:
    """Empties the trigger-kept counters before a test.

    Django's flush between transactional tests empties SQLite and MySQL/MariaDB
    tables with ``DELETE``, which fires the counter triggers and can leave counter
    rows behind for the next test (PostgreSQL's ``TRUNCATE`` fires none).
    """
    from django.db import connections

    with connections[alias].cursor() as cursor:
        cursor.execute("DELETE FROM later_stage_counts")
        cursor.execute("DELETE FROM later_queue_depth")


@pytest.fixture
def sqlite_alias(request: pytest.FixtureRequest) -> str:
    """The SQLite alias, for behaviour that exists only on SQLite (WAL, VACUUM)."""
    return use_database(request, "sqlite")


@pytest.fixture
def postgres_alias(request: pytest.FixtureRequest) -> str:
    """The PostgreSQL alias, for behaviour that exists only there (skipped if unreachable)."""
    return use_database(request, "postgres")


@pytest.fixture
def vendor(db_alias: str) -> str:
    from django.db import connections

    return connections[db_alias].vendor


@pytest.fixture
def alias(db_alias: str) -> Iterator[str]:
    """The database under test (SQLite, then PostgreSQL), which ``LATER`` of the test
    process names: where the real-process tests enqueue and look."""
    from tests.worker.test_worker_process import later_on

    with later_on(db_alias):
        yield db_alias


@pytest.fixture
def pg_alias(postgres_alias: str) -> Iterator[str]:
    """Like ``alias``, on PostgreSQL only (skipped when unreachable)."""
    from tests.worker.test_worker_process import later_on

    with later_on(postgres_alias):
        yield postgres_alias


@pytest.fixture
def lines(tmp_path: Path) -> Path:
    """The file the tasks of :mod:`tests.worker.tasks` write their lines to."""
    return tmp_path / "lines.jsonl"


@pytest.fixture
def workers(tmp_path):  # type: ignore[no-untyped-def]
    """Real ``later_worker`` processes started by the test (``workers.start(...)``);
    any still running at the end are killed with their process groups."""
    from tests.worker.test_worker_process import Workers

    pool = Workers(tmp_path)
    try:
        yield pool
    finally:
        pool.kill_all()
