"""Where an enqueue's time goes, in one process: no workers, no other load of ours.

For each way of enqueueing (``own``: one ``noop.enqueue()`` per ``transaction.atomic()``;
``in_tx``: 2,000 ``noop.enqueue()`` inside one ``atomic()``; ``many``: ``enqueue_many`` in
batches of 1,000; ``many_ids``: the same with ``ids_only=True``) it prints one JSON line:

* ``ms_per_job``: wall time per job (best of ``--rounds``);
* ``python_cpu_ms``: this process's CPU per job (best of ``--rounds``);
* ``server_cpu_ms`` (PostgreSQL): the CPU of the server backend serving this
  connection, per job, read from ``/proc`` (same machine) — robust against other load,
  unlike wall time;
* ``python_calls``: Python function calls per job under ``cProfile`` (deterministic:
  the figure to compare two versions of the code on a busy machine);
* ``statements``: statements per job sent to the database (``BEGIN``/``COMMIT`` included).

Then the bare baseline, ``bench.py``'s: a loop of ``INSERT`` + ``COMMIT`` of one
100-byte row through psycopg or sqlite3 on the same database (``bare_insert_commit``).

    .venv/bin/python bench/enqueue_path.py --db postgres
    .venv/bin/python bench/enqueue_path.py --db sqlite --rounds 5
    .venv/bin/python bench/enqueue_path.py --db sqlite --ways many,many_ids

``--ways`` runs only the ways named (comma-separated; default: all four).

PostgreSQL: ``--postgres-url`` (default ``postgres://root@127.0.0.1:5432/bench_enqueue_path``;
that database is dropped and created, and dropped at the end). SQLite: a temporary file.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

IN_TX_JOBS = 2_000
OWN_JOBS = 2_000
MANY_JOBS = 20_000
BATCH = 1_000
PROFILED_JOBS = {"own": 500, "in_tx": 500, "many": 5_000, "many_ids": 5_000}


def _backend_cpu_seconds(connection: Any) -> float | None:
    """CPU seconds used so far by the PostgreSQL backend of ``connection`` (None elsewhere)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return None


def _ways() -> dict[str, tuple[Callable[[int], None], int]]:
    from django.db import transaction

    from bench.bench_project.tasks import noop
    from later_django.api import enqueue_many

    def own(jobs: int) -> None:
        for _ in range(jobs):
            with transaction.atomic():
                noop.enqueue()

    def in_tx(jobs: int) -> None:
        with transaction.atomic():
            for _ in range(jobs):
                noop.enqueue()

    def many(jobs: int) -> None:
        for _ in range(0, jobs, BATCH):
            with transaction.atomic():
                enqueue_many(noop, [((), {})] * BATCH)

    def many_ids(jobs: int) -> None:
        for _ in range(0, jobs, BATCH):
            with transaction.atomic():
                enqueue_many(noop, [((), {})] * BATCH, ids_only=True)

    return {
        "own": (own, OWN_JOBS),
        "in_tx": (in_tx, IN_TX_JOBS),
        "many": (many, MANY_JOBS),
        "many_ids": (many_ids, MANY_JOBS),
    }


def measure(db: str, rounds: int, ways: list[str] | None = None) -> list[dict[str, Any]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    lines = []
    for name, (way, jobs) in _ways().items():
        if ways is not None and name not in ways:
            continue
        way(min(jobs, 200))  # warm: connection, statements, caches
        walls, cpus, servers = [], [], []
        for _ in range(rounds):
            server_before = _backend_cpu_seconds(connection)
            wall, cpu = time.perf_counter(), time.process_time()
            way(jobs)
            walls.append((time.perf_counter() - wall) / jobs * 1000)
            cpus.append((time.process_time() - cpu) / jobs * 1000)
            server_after = _backend_cpu_seconds(connection)
            if server_before is not None and server_after is not None:
                servers.append((server_after - server_before) / jobs * 1000)
        profiled = PROFILED_JOBS[name]
        profile = cProfile.Profile()
        with CaptureQueriesContext(connection) as captured:
            profile.enable()
            way(profiled)
            profile.disable()
        calls = pstats.Stats(profile, stream=io.StringIO()).total_calls  # type: ignore[attr-defined]
        lines.append(
            {
                "db": db,
                "way": name,
                "jobs": jobs,
                "ms_per_job": round(min(walls), 4),
                "jobs_per_s": round(1000 / min(walls), 1),
                "python_cpu_ms": round(min(cpus), 4),
                "server_cpu_ms": round(min(servers), 4) if servers else None,
                "python_calls": round(calls / profiled, 1),
                "statements": round(len(captured.captured_queries) / profiled, 3),
                "rounds": rounds,
            }
        )
    return lines


def bare_insert_commit(db: str, rounds: int, rows: int = 2_000) -> dict[str, Any]:
    """``bench.py``'s bare ``INSERT`` + ``COMMIT`` loop (:func:`bench.bench.bare_inserts`)
    on this run's database: the floor of an enqueue, best of ``rounds``."""
    from bench.bench import bare_inserts

    with bare_inserts() as insert:
        best = min(insert(rows) for _ in range(rounds))
    return {"db": db, "way": "bare_insert_commit", "ms_per_job": round(best / rows * 1000, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--postgres-url", default="postgres://root@127.0.0.1:5432/bench_enqueue_path"
    )
    parser.add_argument(
        "--ways",
        help="comma-separated ways to run (own, in_tx, many, many_ids; default: all)",
    )
    options = parser.parse_args()
    ways = options.ways.split(",") if options.ways else None
    unknown = sorted(set(ways or ()) - set(PROFILED_JOBS))
    if unknown:
        parser.error(f"unknown ways {unknown}; choose from {sorted(PROFILED_JOBS)}")
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.bench_project.settings"
    os.environ["BENCH_SYSTEM"] = "later_django"
    directory = tempfile.mkdtemp(prefix="later-enqueue-path-")
    admin = name = None
    if options.db == "postgres":
        import dj_database_url

        from bench.django_setup import admin_connection

        database = dj_database_url.parse(options.postgres_url)
        admin, name = admin_connection(database), database["NAME"]
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
        os.environ["BENCH_DATABASE_URL"] = options.postgres_url
    else:
        os.environ["BENCH_DATABASE_URL"] = f"sqlite:///{directory}/enqueue.sqlite3"
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        for line in measure(options.db, options.rounds, ways):
            print(json.dumps(line), flush=True)
        print(json.dumps(bare_insert_commit(options.db, options.rounds)))
        from later_django.engine import metrics

        metrics.flush()  # now, while the database exists (not at exit)
        connection.close()
    finally:
        if admin is not None:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for leftover in Path(directory).glob("*"):
            leftover.unlink()
        os.rmdir(directory)


if __name__ == "__main__":
    main()
