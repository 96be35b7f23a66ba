"""Throwaway MariaDB servers for the cells that stop the server or exhaust it, and the
admin side of every MariaDB target (databases, users, ``KILL CONNECTION``).

A :class:`Server` is a ``mariadbd`` this controller started: a data directory made
by ``mariadb-install-db`` in a temporary directory, ``--no-defaults`` (nothing of the
machine's configuration), a free port on 127.0.0.1, real grants (``root`` without a
password from 127.0.0.1). :meth:`Server.stop` (SIGTERM: a clean shutdown, like
``pg_ctl stop -m fast``) and :meth:`Server.start` act only on a server recorded here
at creation and on the process this controller started, never on another server (the
shared one on 3306 is never stopped); :meth:`Server.drop` kills it and removes its
directory, which :func:`throwaway_server` and ``atexit`` call even on failure.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import MySQLdb

from chaos.cluster import free_port

#: directory -> the server created there and not dropped yet.
_CREATED: dict[str, Server] = {}
#: MariaDB's "Unknown thread id": the connection ended before its KILL.
_UNKNOWN_THREAD = 1094


def admin_connection(host: str, port: int, database: str | None = None) -> Any:
    """A ``root`` connection (autocommit), without a password, from 127.0.0.1."""
    options: dict[str, Any] = {"host": host, "port": port, "user": "root", "connect_timeout": 3}
    if database:
        options["database"] = database
    connection = MySQLdb.connect(**options)
    connection.autocommit(True)
    return connection


def admin(host: str, port: int, *statements: str, database: str | None = None) -> None:
    connection = admin_connection(host, port, database)
    try:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
    finally:
        connection.close()


def kill_sessions(host: str, port: int, user: str, database: str) -> int:
    """``KILL CONNECTION`` of every session of ``user`` on ``database``; how many."""
    connection = admin_connection(host, port)
    killed = 0
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s AND DB = %s",
                (user, database),
            )
            for (session,) in cursor.fetchall():
                try:
                    cursor.execute(f"KILL CONNECTION {int(session):d}")
                    killed += 1
                except MySQLdb.OperationalError as error:
                    if error.args[0] != _UNKNOWN_THREAD:
                        raise
    finally:
        connection.close()
    return killed


@dataclass
class Server:
    """A ``mariadbd`` this controller made; ``port`` on 127.0.0.1, ``root`` admin."""

    directory: Path
    port: int
    options: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def _own(self, action: str) -> None:
        if _CREATED.get(str(self.directory)) is not self:
            raise RuntimeError(f"refusing to {action} the server in {self.directory}: not ours")

    def start(self, timeout: float = 60.0) -> None:
        """Starts ``mariadbd`` on this server's data directory; returns when it answers."""
        self._own("start")
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("the server is running already")
        argv = [
            "mariadbd", "--no-defaults",
            f"--datadir={self.directory / 'data'}",
            f"--socket={self.directory / 'mariadb.sock'}",
            f"--pid-file={self.directory / 'mariadb.pid'}",
            f"--log-error={self.directory / 'error.log'}",
            f"--port={self.port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
            # mariadbd refuses to run as root unless told to; the controller runs as root.
            "--user=root",
            "--innodb-buffer-pool-size=128M",
            *self.options,
        ]  # fmt: skip
        with open(self.directory / "mariadbd.out", "ab") as out:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                admin_connection(self.host, self.port).close()
                return
            except MySQLdb.OperationalError:
                if self.process is None or self.process.poll() is not None:
                    raise RuntimeError(f"mariadbd exited; see {self.directory}/error.log") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> None:
        """A clean shutdown (SIGTERM), waited for; SIGKILL if it takes over ``timeout``."""
        self._own("stop")
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def drop(self) -> None:
        """Kills the server and removes its directory (idempotent)."""
        if _CREATED.pop(str(self.directory), None) is None:
            return
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)


def create_server(options: dict[str, str] | None = None) -> Server:
    """Initialises a data directory and starts a server on it; ``options`` are extra
    ``mariadbd`` settings (``max_connections`` …)."""
    directory = Path(tempfile.mkdtemp(prefix="chaos-mariadb-"))
    server = Server(
        directory,
        free_port(),
        tuple(f"--{key.replace('_', '-')}={value}" for key, value in (options or {}).items()),
    )
    _CREATED[str(directory)] = server
    try:
        subprocess.run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={directory / 'data'}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
        server.start()
    except BaseException:
        server.drop()
        raise
    return server


@contextlib.contextmanager
def throwaway_server(options: dict[str, str] | None = None) -> Iterator[Server]:
    """A new server for the ``with`` block, removed at its end whatever happens."""
    server = create_server(options)
    try:
        yield server
    finally:
        server.drop()


def _drop_leftovers() -> None:
    for server in list(_CREATED.values()):
        with contextlib.suppress(Exception):
            server.drop()


atexit.register(_drop_leftovers)
