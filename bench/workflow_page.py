"""The Workflows pages at scale: a 1,000-job workflow's page with 1,000,000 jobs in
the table, and the list.

Seeds ``--rows`` (default 1,000,000) job records straight into ``later_storage``
(one bulk ``INSERT … SELECT``: keys ``<ns>-job-01BENCH…``, a 200-byte value each),
then enqueues through the API one workflow of ``--nodes`` (default 1,000) steps
(step ``i`` after step ``(i - 1) // 2``, and every fifth also after step ``i - 1``:
a binary tree with fan-ins; one ready root, the rest waiting, so every drawn node
but the root has a waiting text) and ``--small`` (default 2,000) one-step
workflows, and renders through Django's test client, logged in as a superuser:

* ``workflow_page_ms``: ``/admin/later_django/workflows/<id>/`` of the big workflow
  (target ≤ 150 ms, issue 35 item 5): its first 300 jobs drawn, the next 700 listed;
* ``workflow_list_ms``: ``/admin/later_django/workflows/``, the newest 50;
* ``workflow_list_filtered_ms``: ``?state=failed``, which no workflow is in: the
  walk reads the whole bound of 2,000 workflows (the worst page of the filter).

Each figure is the median of ``--renders`` renders after two warm-up renders, one
JSON line (``figure``, ``db``, ``rows``, ``nodes``, ``value``, ``unit``, ``target``,
``queries``, and ``cpu_ms``: the median CPU time of the rendering process, which a
busy machine inflates less than the wall time). The databases are throw-away, as
``bench/dashboard.py``'s (whose settings and helpers this uses): a SQLite file in a
temporary directory, and the PostgreSQL database of ``--postgres-url`` (default
``later_bench_workflow_page``), dropped and created on every run and dropped at the
end.

    .venv/bin/python bench/workflow_page.py                  # SQLite, then PostgreSQL
    .venv/bin/python bench/workflow_page.py --db postgres --rows 200000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_POSTGRES_URL = "postgres://root@127.0.0.1:5432/later_bench_workflow_page"
NAMESPACE = "default"

SEED = {
    "sqlite": (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
        "INSERT INTO later_storage (key, value, date_created, date_updated) "
        "SELECT printf('%s-job-01BENCH%%019d', i), randomblob(200), %s, %s FROM n"
    ),
    "postgresql": (
        "INSERT INTO later_storage (key, value, date_created, date_updated) "
        "SELECT %s || '-job-01BENCH' || lpad(i::text, 19, '0'),"
        " decode(repeat(md5(i::text), 7), 'hex'), %s, %s FROM generate_series(1, %s) AS i"
    ),
}


def seed(rows: int) -> float:
    """``rows`` job records in ``later_storage``; seconds taken."""
    from django.db import connection

    from later_django.core.clock import now_ms

    now = now_ms()
    started = time.perf_counter()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(SEED["sqlite"] % ("%s", NAMESPACE, "%s", "%s"), [rows, now, now])
            cursor.execute("ANALYZE")
        else:
            cursor.execute(SEED["postgresql"], [NAMESPACE, now, now, rows])
            cursor.execute("VACUUM ANALYZE later_storage, later_storage_range")
    return time.perf_counter() - started


def big_workflow(nodes: int) -> str:
    """A workflow of ``nodes`` steps (see the module), enqueued; its id."""
    from bench.bench_project.tasks import noop
    from later_django.workflow import Workflow

    flow = Workflow(f"bench {nodes:,}")
    for i in range(nodes):
        after = [] if i == 0 else [f"s{(i - 1) // 2}"]
        if i > 1 and i % 5 == 0:
            after.append(f"s{i - 1}")
        flow.add(f"s{i}", noop, after=after)
    flow.enqueue()
    return flow.id


def cpu_per_render(client, url: str, renders: int) -> float:  # type: ignore[no-untyped-def]
    """Median CPU milliseconds of this process per render of ``url``: the page's Python
    (and SQLite's) work, which other load on the machine does not inflate as it does
    the wall time (PostgreSQL's server time is not in it)."""
    timings = []
    for _ in range(renders):
        started = time.process_time()
        client.get(url)
        timings.append((time.process_time() - started) * 1000)
    return round(statistics.median(timings), 2)


def run(db: str, rows: int, nodes: int, small: int, renders: int) -> list[dict]:
    from django.contrib.auth.models import User
    from django.test import Client

    from bench.bench_project.tasks import noop
    from bench.dashboard import timed_renders
    from later_django.engine import metrics
    from later_django.workflow import Workflow

    seconds = seed(rows)
    started = time.perf_counter()
    for n in range(small):
        flow = Workflow(f"small {n}")
        flow.add("only", noop)
        flow.enqueue()
    workflow_id = big_workflow(nodes)
    metrics.flush()  # now, not at exit, when the database is gone
    seconds += time.perf_counter() - started
    print(
        json.dumps(
            {"seeded": db, "rows": rows, "nodes": nodes, "small": small, "s": round(seconds, 1)}
        ),
        flush=True,
    )
    user = User.objects.create_superuser("bench", "bench@example.com", "bench")
    client = Client()
    client.force_login(user)
    figures = []
    for name, url in (
        ("workflow_page_ms", f"/admin/later_django/workflows/{workflow_id}/"),
        ("workflow_list_ms", "/admin/later_django/workflows/"),
        ("workflow_list_filtered_ms", "/admin/later_django/workflows/?state=failed"),
    ):
        value, queries = timed_renders(client, url, renders)
        cpu = cpu_per_render(client, url, renders)
        line = {
            "figure": name,
            "db": db,
            "rows": rows,
            "nodes": nodes,
            "value": value,
            "unit": "ms",
            "target": 150,
            "queries": queries,
            "cpu_ms": cpu,
        }
        print(json.dumps(line), flush=True)
        figures.append(line)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--small", type=int, default=2_000)
    parser.add_argument("--renders", type=int, default=15)
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.db == "all":
        # One process per database: Django is configured once per process.
        for db in ("sqlite", "postgres"):
            command = [sys.executable, __file__, "--db", db, "--child"]
            for option in ("rows", "nodes", "small", "renders"):
                command += [f"--{option}", str(getattr(args, option))]
            command += ["--postgres-url", args.postgres_url]
            subprocess.run(command, check=True)
        return
    from bench.dashboard import configure, drop_postgres

    with tempfile.TemporaryDirectory() as directory:
        configure(args.db, directory, args.postgres_url)
        try:
            run(args.db, args.rows, args.nodes, args.small, args.renders)
        finally:
            if args.db == "postgres":
                from django.db import connections

                connections.close_all()
                drop_postgres(args.postgres_url)


if __name__ == "__main__":
    main()
