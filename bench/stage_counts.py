"""Stage-count read at scale: the trigger-kept counters against the COUNT(*) they replace.

Seeds ``LATER_BENCH_ROWS`` (default 1,500,000) delayed jobs into
``later_jobs_index`` of a fresh database, recounts the counters, then times

* ``counter_read_ms``: ``JobIndexStore.job_index_stage_counts`` (what the dashboard reads),
* ``scan_ms``: ``SELECT COUNT(*) ... WHERE stage IN (live stages)``, the plain count,

each the median of several reads, and prints one JSON line per database.
Later's own bar (seed test ``stage_counts_stay_fast_at_a_million_and_a_half_jobs``):
the counter read under 20 ms at 1.5 M rows.

Run from the repository root with the project's venv:

    .venv/bin/python bench/stage_counts.py                 # SQLite and PostgreSQL
    .venv/bin/python bench/stage_counts.py --db sqlite
    LATER_BENCH_ROWS=100000 .venv/bin/python bench/stage_counts.py --db postgres

PostgreSQL comes from ``LATER_BENCH_DATABASE_URL`` (default
``postgres://root@127.0.0.1:5432/later_bench``; the database is created when
missing and its later_* tables are rebuilt on every run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.django_setup import configure_django

READS = 7
NAMESPACE = "bench"
LIVE_STAGE_COUNT = (
    "SELECT COUNT(*) FROM later_jobs_index WHERE namespace = %s "
    "AND stage IN ('delayed', 'waiting', 'enqueued', 'running', 'requeued')"
)
SEED = {
    "sqlite": (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
        "INSERT INTO later_jobs_index "
        "(namespace, job_id, payload_type, stage, stage_date_ms, revision, created_at_ms) "
        "SELECT %s, printf('job-%%08d', i), 't', 'delayed', %s + i, 0, %s FROM n"
    ),
    "postgresql": (
        "INSERT INTO later_jobs_index "
        "(namespace, job_id, payload_type, stage, stage_date_ms, revision, created_at_ms) "
        "SELECT %s, 'job-' || lpad(i::text, 8, '0'), 't', 'delayed', %s + i, 0, %s "
        "FROM generate_series(1, %s) AS i"
    ),
}


def median_ms(action, reads: int = READS) -> tuple[float, object]:
    timings, result = [], None
    for _ in range(reads):
        started = time.perf_counter()
        result = action()
        timings.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(timings), 3), result


def run(db: str, rows: int) -> dict:
    from django.db import connection

    from later_django.core.clock import now_ms
    from later_django.storage.stores import stores_for

    vendor = connection.vendor
    now = now_ms()
    seeding_started = time.perf_counter()
    with connection.cursor() as cursor:
        if vendor == "sqlite":
            cursor.execute(SEED["sqlite"], [rows, NAMESPACE, now, now])
        else:
            cursor.execute(SEED["postgresql"], [NAMESPACE, now, now, rows])
            cursor.execute("VACUUM ANALYZE later_jobs_index")
    seed_seconds = time.perf_counter() - seeding_started
    storage = stores_for("default")
    storage.index.job_index_reconcile_stage_counts(NAMESPACE)

    counter_read_ms, counts = median_ms(lambda: storage.index.job_index_stage_counts(NAMESPACE))
    if counts.get("delayed") != rows:
        raise SystemExit(f"counter read {counts} does not match the {rows} seeded rows")

    def scan() -> int:
        with connection.cursor() as cursor:
            cursor.execute(LIVE_STAGE_COUNT, [NAMESPACE])
            return cursor.fetchone()[0]

    scan_ms, scanned = median_ms(scan, reads=3)
    if scanned != rows:
        raise SystemExit(f"COUNT(*) found {scanned}, expected {rows}")
    return {
        "db": db,
        "rows": rows,
        "counter_read_ms": counter_read_ms,
        "scan_ms": scan_ms,
        "seed_s": round(seed_seconds, 1),
        "target_counter_read_ms": 20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "all"], default="all")
    args = parser.parse_args()
    rows = int(os.environ.get("LATER_BENCH_ROWS", "1500000"))
    if args.db == "all":
        # One process per database: Django is configured once per process.
        import subprocess

        for db in ("sqlite", "postgres"):
            subprocess.run([sys.executable, __file__, "--db", db], check=True)
        return
    with tempfile.TemporaryDirectory(prefix="later-bench-") as directory:
        configure_django(args.db, str(Path(directory) / "bench.sqlite3"), rebuild_tables=True)
        print(json.dumps(run(args.db, rows)), flush=True)


if __name__ == "__main__":
    main()
