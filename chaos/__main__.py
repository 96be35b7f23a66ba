"""``python -m chaos --profile short|long|soak [--cell NAME ...] [--db VENDOR ...]``.

Runs the selected cells one at a time, each on a fresh database (SQLite file,
a database of its own on the main PostgreSQL or MariaDB server, or a throwaway
PostgreSQL cluster or MariaDB server), prints each
cell's table and verdict, and exits 1 if any cell failed (2 on Ctrl-C). Every
process and cluster started is removed, also on failure or interruption.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from chaos.cells import CELLS, CLUSTER, MARIADB, MARIADB_SERVER, SQLITE, VENDORS, Cell
from chaos.cluster import Cluster, throwaway_cluster
from chaos.databases import (
    Target,
    cluster_database,
    main_server_database,
    mariadb_main_database,
    mariadb_server_database,
    sqlite_target,
)
from chaos.harness import Profile, Run
from chaos.mariadb import Server, throwaway_server
from chaos.procs import REGISTRY
from chaos.report import Result

PROFILES = {"short": 1.0, "long": 4.0, "soak": 1.0}


@contextlib.contextmanager
def database(
    kind: str, cell: Cell, directory: Path
) -> Iterator[tuple[Target, Cluster | Server | None]]:
    """The fresh, migrated database of one cell run, and its own server (if any)."""
    if kind == SQLITE:
        yield sqlite_target(directory), None
    elif kind == CLUSTER:
        with throwaway_cluster(cell.cluster_settings) as cluster:
            yield cluster_database(cluster), cluster
    elif kind == MARIADB:
        with mariadb_main_database() as target:
            yield target, None
    elif kind == MARIADB_SERVER:
        with throwaway_server(cell.cluster_settings) as server:
            yield mariadb_server_database(server), server
    else:
        with main_server_database() as target:
            yield target, None


def run_cell(cell: Cell, kind: str, profile: Profile, seed: int, keep: bool) -> Result:
    """One cell on one database; a crash of the cell itself is a FAIL with its traceback."""
    result = Result(cell.name, kind)
    directory = Path(tempfile.mkdtemp(prefix=f"chaos-{cell.name}-{kind}-"))
    began = time.monotonic()
    try:
        with database(kind, cell, directory) as (target, cluster):
            run = Run(result, target, directory, profile, seed, cluster)
            try:
                cell.run(run)
            finally:
                run.close()
    except Exception:
        result.check(False, "the cell ran to its end:\n" + traceback.format_exc())
    finally:
        REGISTRY.kill_all()
        result.seconds = time.monotonic() - began
        if keep or not result.passed:
            result.notes.append(f"logs and ledger kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return result


#: The vendors run when ``--db`` is not given.
DEFAULT_VENDORS = ("sqlite", "postgres")


def selected(options: argparse.Namespace) -> tuple[list[tuple[Cell, str]], list[str]]:
    """(cell, database kind) pairs of the profile, filtered by --cell and --db; and
    why each cell of the selection without a MariaDB database does not run there
    (when MariaDB is selected)."""
    vendors = options.db or DEFAULT_VENDORS
    pairs, skipped = [], []
    for cell in CELLS:
        if options.cell and cell.name not in options.cell:
            continue
        if not options.cell and options.profile not in cell.profiles:
            continue
        pairs += [(cell, kind) for kind in cell.databases if VENDORS[kind] in vendors]
        if "mariadb" in vendors and not {MARIADB, MARIADB_SERVER} & set(cell.databases):
            skipped.append(f"{cell.name}[mariadb] skipped: {cell.not_on_mariadb or 'not ported'}")
    return pairs, skipped


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n\n")[1])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="short")
    parser.add_argument("--cell", action="append", choices=[cell.name for cell in CELLS])
    parser.add_argument(
        "--db",
        action="append",
        choices=sorted(set(VENDORS.values())),
        help=f"a vendor to run (repeatable; default: {', '.join(DEFAULT_VENDORS)})",
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="soak length (default 30)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (kills, timings)")
    parser.add_argument("--keep", action="store_true", help="keep every cell's directory")
    options = parser.parse_args(argv)
    seed = options.seed if options.seed is not None else random.randrange(1_000_000)
    profile = Profile(options.profile, PROFILES[options.profile], options.minutes)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    pairs, skipped = selected(options)
    print(f"chaos: profile {profile.name}, seed {seed}, {len(pairs)} cell run(s)", flush=True)
    for line in skipped:
        print(f"chaos: {line}", flush=True)
    began, results = time.monotonic(), []
    try:
        for cell, kind in pairs:
            results.append(run_cell(cell, kind, profile, seed, options.keep))
            print(results[-1].render(), flush=True)
    except KeyboardInterrupt:
        print("chaos: interrupted; processes and clusters removed", file=sys.stderr)
        return 2
    failed = [f"{r.cell}[{r.database}]" for r in results if not r.passed]
    elapsed = time.monotonic() - began
    print(
        f"chaos: {len(results) - len(failed)}/{len(results)} passed in {elapsed:.0f} s; seed {seed}"
    )
    if failed:
        print(f"chaos: FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
