"""Throwaway PostgreSQL clusters (Debian's ``pg_createcluster``) for the cells that
restart the server, bloat it or exhaust its connections.

A :class:`Cluster` is created with a unique name on a free loopback port, with
production-like settings (autovacuum on, defaults otherwise), ``trust`` for
127.0.0.1/32, and is dropped (``pg_dropcluster --stop``) by :meth:`drop`, which
:func:`throwaway_cluster` and ``atexit`` call even on failure. Only a cluster
recorded here at creation can be stopped or restarted: :meth:`Cluster.ctl`
refuses any other name or port, so no cell can restart a server it did not make.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

#: name -> port of every cluster this controller created and has not dropped yet.
_CREATED: dict[str, int] = {}


def postgres_version() -> str:
    """The newest PostgreSQL major version installed (``/etc/postgresql``)."""
    return max(os.listdir("/etc/postgresql"), key=int)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120)


@dataclass(frozen=True)
class Cluster:
    """A cluster this process created; ``port`` on 127.0.0.1, superuser ``postgres``."""

    version: str
    name: str
    port: int

    def ctl(self, action: str, *extra: str) -> None:
        """``pg_ctlcluster <action>`` (start, stop, restart) of this cluster only."""
        if _CREATED.get(self.name) != self.port:
            raise RuntimeError(f"refusing to {action} cluster {self.name}: not created here")
        _run("pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, action, *extra)

    def dsn(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} dbname={database} user={user}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.dsn(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def drop(self) -> None:
        """Stops and removes the cluster (idempotent)."""
        if _CREATED.pop(self.name, None) is not None:
            _run("pg_dropcluster", "--stop", self.version, self.name)


def create_cluster(settings: dict[str, str] | None = None) -> Cluster:
    """Creates and starts a new cluster; ``settings`` are extra ``postgresql.conf`` lines."""
    version = postgres_version()
    name = f"chaos_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    port = free_port()
    _run("pg_createcluster", version, name, "-p", str(port), "--", "--auth-local=trust")
    _CREATED[name] = port
    cluster = Cluster(version, name, port)
    config = Path(f"/etc/postgresql/{version}/{name}")
    lines = {"listen_addresses": "'127.0.0.1'", "autovacuum": "on", **(settings or {})}
    with open(config / "conf.d" / "chaos.conf", "w") as conf:
        conf.writelines(f"{key} = {value}\n" for key, value in lines.items())
    with open(config / "pg_hba.conf", "a") as hba:
        hba.write("host all all 127.0.0.1/32 trust\n")
    cluster.ctl("start")
    cluster.wait_ready()
    return cluster


@contextlib.contextmanager
def throwaway_cluster(settings: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A new cluster for the ``with`` block, dropped at its end whatever happens."""
    cluster = create_cluster(settings)
    try:
        yield cluster
    finally:
        cluster.drop()


def _drop_leftovers() -> None:
    for name, port in list(_CREATED.items()):
        with contextlib.suppress(Exception):
            Cluster(postgres_version(), name, port).drop()


atexit.register(_drop_leftovers)
