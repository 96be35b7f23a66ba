"""The database a cell runs on: a fresh SQLite WAL file, a database of its own on the
main PostgreSQL server, or one on a throwaway cluster (:mod:`chaos.cluster`).

A :class:`Target` knows the Django settings of each role's connection
(``application_name`` ``chaos-<role>`` on PostgreSQL, so the controller can
terminate the workers' connections and no one else's), an admin ``psycopg``
connection string, and how to migrate itself (``python -m django migrate``
with :mod:`chaos.settings`).
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


@dataclass(frozen=True)
class Target:
    """One database under test."""

    vendor: str  # "sqlite" or "postgres"
    name: str  # SQLite: the file path; PostgreSQL: the database name
    host: str = ""
    port: int = 0
    user: str = ""
    admin_user: str = ""

    def django(self, role: str) -> dict[str, Any]:
        """The ``DATABASES`` entry for a process of ``role`` (worker, enqueuer, agent)."""
        if self.vendor == "sqlite":
            return {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": self.name,
                "OPTIONS": SQLITE_OPTIONS,
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
