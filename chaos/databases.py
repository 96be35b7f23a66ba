"""The database a cell runs on: a fresh SQLite WAL file, a database of its own on the
main PostgreSQL or MariaDB server, or one on a throwaway cluster (:mod:`chaos.cluster`)
or MariaDB server (:mod:`chaos.mariadb`).

A :class:`Target` knows the Django settings of each role's connection, so the
controller can end the workers' connections and no one else's: ``application_name``
``chaos-<role>`` on PostgreSQL; on MariaDB a user of their own (``<prefix>_worker``,
every other role ``<prefix>_app``, both granted on the cell's database only and
dropped with it). It knows an admin connection (``psycopg`` string; MariaDB: ``root``)
and how to migrate itself (``python -m django migrate`` with :mod:`chaos.settings`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from chaos import mariadb
from chaos.cluster import Cluster
from chaos.procs import REPOSITORY

#: The options tests/settings.py uses (the configuration recommended to users).
SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
}
MAIN_SERVER = {"host": "127.0.0.1", "port": 5432, "user": "root"}
#: The non-superuser role that owns a cluster database (so it cannot take reserved slots).
APP_ROLE = "chaos"
#: The main MariaDB server (``root`` without a password from 127.0.0.1).
MARIADB_HOST, MARIADB_PORT = "127.0.0.1", 3306
#: The options of tests/settings.py's ``mariadb`` (the configuration users are told to
#: use: READ COMMITTED, utf8mb4), and a bound on connecting to a server that is down.
MYSQL_OPTIONS = {"isolation_level": "read committed", "charset": "utf8mb4", "connect_timeout": 3}


@dataclass(frozen=True)
class Target:
    """One database under test."""

    vendor: str  # "sqlite", "postgres" or "mysql"
    name: str  # SQLite: the file path; otherwise the database name
    host: str = ""
    port: int = 0
    user: str = ""  # MySQL: the prefix of the roles' users
    admin_user: str = ""
    password: str = ""  # MySQL: every role user's

    def role_user(self, role: str) -> str:
        """MySQL: the user of ``role``'s connections (workers have one of their own)."""
        return f"{self.user}_{'worker' if role == 'worker' else 'app'}"

    def django(self, role: str) -> dict[str, Any]:
        """The ``DATABASES`` entry for a process of ``role`` (worker, enqueuer, agent)."""
        if self.vendor == "sqlite":
            return {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": self.name,
                "OPTIONS": SQLITE_OPTIONS,
            }
        if self.vendor == "mysql":
            return {
                "ENGINE": "django.db.backends.mysql",
                "NAME": self.name,
                "HOST": self.host,
                "PORT": str(self.port),
                "USER": self.role_user(role),
                "PASSWORD": self.password,
                "OPTIONS": MYSQL_OPTIONS,
            }
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": self.name,
            "HOST": self.host,
            "PORT": str(self.port),
            "USER": self.user,
            "OPTIONS": {"application_name": f"chaos-{role}", "connect_timeout": 3},
        }

    def env(self, role: str) -> dict[str, str]:
        """Environment of a Django child process of ``role`` on this database."""
        return {
            "DJANGO_SETTINGS_MODULE": "chaos.settings",
            "CHAOS_DATABASE": json.dumps(self.django(role)),
        }

    def admin_dsn(self, user: str | None = None) -> str:
        """``psycopg`` connection string (PostgreSQL only) as the admin (or ``user``)."""
        return (
            f"host={self.host} port={self.port} dbname={self.name} "
            f"user={user or self.admin_user} application_name=chaos-controller"
        )

    def migrate(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"],
            env={**os.environ, "PYTHONPATH": str(REPOSITORY), **self.env("migrate")},
            cwd=REPOSITORY,
            check=True,
            timeout=180,
        )


def sqlite_target(directory: Path) -> Target:
    """A fresh, migrated WAL-mode SQLite file in ``directory``."""
    target = Target("sqlite", str(directory / "chaos.sqlite3"))
    target.migrate()
    return target


def _admin(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        for statement in statements:
            connection.execute(statement)


@contextlib.contextmanager
def main_server_database() -> Iterator[Target]:
    """A database of its own on the main server (127.0.0.1:5432), dropped afterwards."""
    server = MAIN_SERVER
    name = f"chaos_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = f"host={server['host']} port={server['port']} dbname=postgres user={server['user']}"
    _admin(admin, f'CREATE DATABASE "{name}"')
    target = Target(
        "postgres", name, server["host"], server["port"], server["user"], server["user"]
    )
    try:
        target.migrate()
        yield target
    finally:
        _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cluster_database(cluster: Cluster) -> Target:
    """A migrated database owned by the non-superuser :data:`APP_ROLE` on ``cluster``."""
    _admin(
        cluster.dsn(),
        f"CREATE ROLE {APP_ROLE} LOGIN",
        f"CREATE DATABASE chaos OWNER {APP_ROLE}",
    )
    target = Target("postgres", "chaos", "127.0.0.1", cluster.port, APP_ROLE, "postgres")
    target.migrate()
    return target


def mysql_target(host: str, port: int, name: str) -> Target:
    """Creates database ``name`` and its two users on the MariaDB server at ``host:port``
    (``root``), and migrates it; :func:`drop_mysql` removes them."""
    prefix = f"chaos_{uuid.uuid4().hex[:8]}"
    target = Target("mysql", name, host, port, prefix, "root", uuid.uuid4().hex)
    statements = [f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"]
    for role in ("worker", "app"):
        user = f"'{target.role_user(role)}'@'127.0.0.1'"
        statements += [
            f"CREATE USER {user} IDENTIFIED BY '{target.password}'",
            f"GRANT ALL PRIVILEGES ON `{name}`.* TO {user}",
        ]
    try:
        mariadb.admin(host, port, *statements)
        target.migrate()
    except BaseException:
        drop_mysql(target)
        raise
    return target


def drop_mysql(target: Target) -> None:
    """Drops the target's users (ending their sessions) and its database."""
    connection = mariadb.admin_connection(target.host, target.port)
    try:
        with connection.cursor() as cursor:
            for role in ("worker", "app"):
                user = target.role_user(role)
                cursor.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (user,)
                )
                for (session,) in cursor.fetchall():
                    with contextlib.suppress(Exception):
                        cursor.execute(f"KILL CONNECTION {int(session):d}")
                cursor.execute(f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")
            cursor.execute(f"DROP DATABASE IF EXISTS `{target.name}`")
    finally:
        connection.close()


@contextlib.contextmanager
def mariadb_main_database() -> Iterator[Target]:
    """A database of its own on the main MariaDB server (127.0.0.1:3306), with users of
    its own, all dropped afterwards."""
    name = f"chaos_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    target = mysql_target(MARIADB_HOST, MARIADB_PORT, name)
    try:
        yield target
    finally:
        drop_mysql(target)


def mariadb_server_database(server: mariadb.Server) -> Target:
    """A migrated database with its users on a throwaway server (dropped with it)."""
    return mysql_target(server.host, server.port, "chaos")
