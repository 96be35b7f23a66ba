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

#: Where a cell may run: SQLite file, a database on the main server, a throwaway cluster.
SQLITE, POSTGRES, CLUSTER = "sqlite", "postgres", "cluster"


@dataclass(frozen=True)
class Cell:
    name: str
    run: Callable[[Run], None]
    databases: tuple[str, ...]
    profiles: tuple[str, ...] = ("short", "long")
    cluster_settings: dict[str, str] = field(default_factory=dict)


CELLS = [
    Cell("sigkill", kills.sigkill, (SQLITE, POSTGRES)),
    Cell("fan_in", fan_in.fan_in, (SQLITE, POSTGRES)),
    Cell("pg_restart", outages.pg_restart, (CLUSTER,)),
    Cell("pg_terminate", outages.pg_terminate, (POSTGRES,)),
    Cell("snapshot_pin", snapshot.snapshot_pin, (CLUSTER,)),
    Cell("sqlite_lock_storm", storm.sqlite_lock_storm, (SQLITE,)),
    Cell("poison", poison.poison, (SQLITE, POSTGRES)),
    Cell(
        "max_connections",
        outages.max_connections,
        (CLUSTER,),
        cluster_settings={"max_connections": "40"},
    ),
    Cell("soak", soak.soak, (CLUSTER,), profiles=("soak",)),
]
