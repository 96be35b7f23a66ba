"""Real ``pgbouncer`` processes between the tests and the PostgreSQL test database.

``transaction_pool``, ``single_server_transaction_pool`` and ``session_pool`` each
start Debian's ``pgbouncer`` on a free 127.0.0.1 port, in front of the test
database pytest-django created on 127.0.0.1:5432, and kill it at the end of the
test. The tests are skipped when
the binary is absent, unless ``LATER_REQUIRE_PGBOUNCER`` is set (then they fail),
and when PostgreSQL is unreachable, like every PostgreSQL test.

``web_side`` runs :mod:`tests.pgbouncer.web_side` as its own process with its
``default`` database routed through a pool; ``start_pooled_worker`` starts a real
``later_worker`` the same way (settings :mod:`tests.pgbouncer.pooled_settings`).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings

from tests.browser.example_site import free_port
from tests.worker.test_worker_process import (
    REPOSITORY,
    WorkerProcess,
    Workers,
    database_settings,
)

POOLED_SETTINGS = "tests.pgbouncer.pooled_settings"
WEB_SIDE = "tests.pgbouncer.web_side"
ROUTE_VARIABLE = "LATER_PGBOUNCER_ROUTE"


@pytest.fixture(scope="session")
def pgbouncer_binary() -> str:
    """The path of ``pgbouncer``; skips the test when there is none, unless
    ``LATER_REQUIRE_PGBOUNCER`` is set (CI), which makes its absence a failure."""
    binary = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if binary is None:
        if os.environ.get("LATER_REQUIRE_PGBOUNCER"):
            pytest.fail("LATER_REQUIRE_PGBOUNCER is set but there is no pgbouncer binary")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    return binary


class PgBouncer:
    """One ``pgbouncer`` process in ``pool_mode`` in front of the database of
    ``database`` (Django settings); its config, user list and log live in ``directory``."""

    def __init__(
        self, binary: str, directory: Path, database: dict[str, Any], pool_mode: str, size: int
    ) -> None:
        self.database = database
        self.pool_mode = pool_mode
        self.port = free_port()
        self.user = database.get("USER") or getpass.getuser()
        self.log_path = directory / f"pgbouncer-{pool_mode}.log"
        config = directory / f"pgbouncer-{pool_mode}.ini"
        users = directory / f"pgbouncer-{pool_mode}-users.txt"
        users.write_text(f'"{self.user}" ""\n')
        config.write_text(
            f"[databases]\n"
            f"{database['NAME']} = host={database.get('HOST') or '127.0.0.1'} "
            f"port={database.get('PORT') or 5432} dbname={database['NAME']}\n"
            f"[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            f"unix_socket_dir =\n"
            f"auth_type = trust\n"
            f"auth_file = {users}\n"
            f"pool_mode = {pool_mode}\n"
            f"default_pool_size = {size}\n"
            f"max_client_conn = 200\n"
        )
        # pgbouncer refuses to run as root; -u drops to another user once it has
        # read its files, and it logs to stderr, a file opened here.
        command = [binary, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(config)]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        self._wait_until_it_answers()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def connect(self, **options: Any) -> psycopg.Connection:
        """A plain psycopg connection through this pool (autocommit unless told)."""
        options.setdefault("autocommit", True)
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=self.user,
            dbname=self.database["NAME"],
            connect_timeout=3,
            **options,
        )

    def _wait_until_it_answers(self) -> None:
        deadline = time.monotonic() + 10
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"pgbouncer exited {self.process.returncode}\n{self.log()}")
            try:
                with self.connect() as connection:
                    connection.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"pgbouncer did not answer on {self.port}\n{self.log()}")
                time.sleep(0.05)

    def route(self, **options: Any) -> dict[str, Any]:
        """The keys of a Django ``DATABASES`` entry that send it through this pool,
        with ``OPTIONS`` = ``options`` (none: the settings docs/operations.md gives)."""
        return {
            "HOST": "127.0.0.1",
            "PORT": self.port,
            "OPTIONS": options,
            "DISABLE_SERVER_SIDE_CURSORS": True,
        }

    def stop(self) -> None:
        """Immediate shutdown (SIGTERM closes every client and server connection)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_pool(
    request: pytest.FixtureRequest, alias: str, binary: str, pool_mode: str, size: int
) -> PgBouncer:
    """A running pool in front of the test database of ``alias``, stopped at the end
    of the test (before pytest-django empties or drops the database)."""
    directory = request.getfixturevalue("tmp_path")
    pool = PgBouncer(binary, directory, database_settings(alias), pool_mode, size)
    request.addfinalizer(pool.stop)
    return pool


@pytest.fixture
def transaction_pool(
    request: pytest.FixtureRequest, pg_alias: str, pgbouncer_binary: str
) -> PgBouncer:
    """pgbouncer with ``pool_mode = transaction`` and up to 4 server connections."""
    return start_pool(request, pg_alias, pgbouncer_binary, "transaction", 4)


@pytest.fixture
def single_server_transaction_pool(
    request: pytest.FixtureRequest, pg_alias: str, pgbouncer_binary: str
) -> PgBouncer:
    """pgbouncer with ``pool_mode = transaction`` and one server connection, which
    every client therefore shares (what one client leaves in the session, all see)."""
    return start_pool(request, pg_alias, pgbouncer_binary, "transaction", 1)


@pytest.fixture
def session_pool(request: pytest.FixtureRequest, pg_alias: str, pgbouncer_binary: str) -> PgBouncer:
    """pgbouncer with ``pool_mode = session``, room for a worker's connections."""
    return start_pool(request, pg_alias, pgbouncer_binary, "session", 20)


def start_pooled_worker(
    workers: Workers, alias: str, pool: PgBouncer, *options: str
) -> WorkerProcess:
    """A real ``later_worker`` on the test database of ``alias``, reaching it through ``pool``."""
    return workers.start(
        alias,
        "--settings",
        POOLED_SETTINGS,
        *options,
        environment={ROUTE_VARIABLE: json.dumps(pool.route())},
    )


@pytest.fixture
def web_side(pg_alias: str) -> Callable[..., dict[str, Any]]:
    """``web_side(pool_route, scenario, **arguments)`` runs one scenario of
    :mod:`tests.pgbouncer.web_side` in a new process whose only database is the
    test database reached by ``pool_route`` (:meth:`PgBouncer.route`), and returns
    what it printed (JSON); a crash fails the test with its output."""

    def run(route: dict[str, Any], scenario: str, **arguments: Any) -> dict[str, Any]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": POOLED_SETTINGS,
            "LATER_WORKER_DATABASE": json.dumps(database_settings(pg_alias)),
            ROUTE_VARIABLE: json.dumps(route),
            "LATER_TEST_SQLITE_DIR": str(settings.SQLITE_DIRECTORY),
        }
        command = [sys.executable, "-m", WEB_SIDE, scenario, json.dumps(arguments)]
        done = subprocess.run(
            command, env=env, cwd=REPOSITORY, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            pytest.fail(f"web side {scenario} exited {done.returncode}\n{done.stdout}{done.stderr}")
        return json.loads(done.stdout.splitlines()[-1])

    return run
