"""The cells of the fault suite, their databases and profiles.

A cell is a function ``run(run: chaos.harness.Run) -> None`` that injects its
faults while load runs, then calls ``run.finish()`` and adds its own figures and
checks to ``run.result``. :data:`CELLS` lists them in the order they run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from chaos.cells import fan_in, kills, outages, poison, snapshot, soak, storm
from chaos.harness import Run

#: Where a cell may run: SQLite file, a database on the main PostgreSQL server, a
#: throwaway cluster, a database on the main MariaDB server, a throwaway MariaDB server.
SQLITE, POSTGRES, CLUSTER = "sqlite", "postgres", "cluster"
MARIADB, MARIADB_SERVER = "mariadb", "mariadb_server"
#: The vendor (``--db``) of each kind of database.
VENDORS = {
    SQLITE: "sqlite",
    POSTGRES: "postgres",
    CLUSTER: "postgres",
    MARIADB: "mariadb",
    MARIADB_SERVER: "mariadb",
}


@dataclass(frozen=True)
class Cell:
    name: str
    run: Callable[[Run], None]
    databases: tuple[str, ...]
    profiles: tuple[str, ...] = ("short", "long")
    cluster_settings: dict[str, str] = field(default_factory=dict)
    #: Why the cell does not run on MariaDB (printed when MariaDB is selected).
    not_on_mariadb: str = ""


CELLS = [
    Cell("sigkill", kills.sigkill, (SQLITE, POSTGRES, MARIADB)),
    Cell("fan_in", fan_in.fan_in, (SQLITE, POSTGRES, MARIADB)),
    Cell("pg_restart", outages.pg_restart, (CLUSTER,), not_on_mariadb="see mariadb_restart"),
    Cell("mariadb_restart", outages.pg_restart, (MARIADB_SERVER,)),
    Cell("pg_terminate", outages.pg_terminate, (POSTGRES,), not_on_mariadb="see mariadb_kill"),
    Cell("mariadb_kill", outages.pg_terminate, (MARIADB,)),
    Cell("snapshot_pin", snapshot.snapshot_pin, (CLUSTER,), not_on_mariadb="see mariadb_snapshot"),
    Cell("mariadb_snapshot", snapshot.snapshot_pin, (MARIADB_SERVER,)),
    Cell(
        "sqlite_lock_storm",
        storm.sqlite_lock_storm,
        (SQLITE,),
        not_on_mariadb="SQLite's one writer lock; MariaDB's row-lock conflicts are the "
        "other cells' (and tests/)",
    ),
    Cell("poison", poison.poison, (SQLITE, POSTGRES, MARIADB)),
    Cell(
        "max_connections",
        outages.max_connections,
        (CLUSTER,),
        cluster_settings={"max_connections": "40"},
        not_on_mariadb="see mariadb_max_connections",
    ),
    Cell(
        "mariadb_max_connections",
        outages.max_connections,
        (MARIADB_SERVER,),
        cluster_settings={"max_connections": "40"},
    ),
    Cell(
        "soak",
        soak.soak,
        (CLUSTER,),
        profiles=("soak",),
        not_on_mariadb="see mariadb_soak",
    ),
    Cell("mariadb_soak", soak.soak, (MARIADB_SERVER,), profiles=("soak",)),
]
