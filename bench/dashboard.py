"""Dashboard at scale: every page of the dashboard with 1,000,000 jobs.

Seeds ``--rows`` (default 1,000,000) jobs straight into ``later_jobs_index`` of a
dedicated database with one bulk ``INSERT … SELECT`` (70 % success, 10 % failed,
10 % delayed, 10 % waiting; 7 task paths; finished rows unexpired), recounts the
stage counters, records a week of queue-length readings, writes the records of every
failed job (3 queues, 3 error classes: the index rows carry the same queue and error
class, as migration 0018's columns) and of the newest 5,000 others, a parent with
100 continuations, and a week of ``later_task_minute`` (7 tasks, failures of 3
classes every minute: 252,025 rows), then renders through Django's test client,
logged in as a superuser:

* ``admin_index_ms``: ``/admin/``, the django-admin-tools index dashboard with
  later_django's panels (target ≤ 150 ms);
* ``plain_dashboard_ms``: ``/admin/later_django/``, the same panels without admin-tools;
* ``job_list_deep_ms``: ``/admin/later_django/jobs/success/?cursor=…``, the page
  100 pages (5,000 jobs) deep, its cursor found by walking the pages first
  (target ≤ 50 ms);
* ``failed_list_<filter>_ms``: the failed list unfiltered and with each filter
  (:data:`LIST_FILTERS`; ``queue_matching_nothing``: a page of the queue filter
  index that finds nothing; before migration 0018 the worst page, whose walk read
  the whole ``SCAN_CAP`` of rows and their records), the search by job id and by task
  prefix (redirects), the job page with 100 continuations and a failed job's page,
  and the tasks, failures (hour, day), queues, workers and recurring pages
  (:data:`PAGES`); target ≤ 150 ms each (issue 16).

Each figure is the median of ``--renders`` renders after two warm-up renders,
printed as one JSON line (``figure``, ``db``, ``rows``, ``value``, ``unit``,
``target``, ``queries``).

The databases are throw-away: a SQLite file in a temporary directory (WAL,
``transaction_mode="IMMEDIATE"``), and the PostgreSQL database
``later_bench_dashboard`` (``--postgres-url``), dropped and created on every run
and dropped at the end.

    .venv/bin/python bench/dashboard.py                  # SQLite, then PostgreSQL
    .venv/bin/python bench/dashboard.py --db postgres --rows 200000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.django_setup import admin_connection

DEFAULT_POSTGRES_URL = "postgres://root@127.0.0.1:5432/later_bench_dashboard"
NAMESPACE = "default"
DEEP_PAGES = 100
URLCONF_NAME = "later_bench_dashboard_urls"

SEED = {
    "sqlite": (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
        "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage, stage_date_ms,"
        " revision, created_at_ms, date_expire, queue_name, error_class) "
        "SELECT %s, printf('01BENCH%%019d', i), printf('bench.tasks.t%%d', i %% 7),"
        " CASE i %% 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'delayed' WHEN 2 THEN 'waiting'"
        " ELSE 'success' END,"
        " %s - i, 2, %s - i - 5,"
        " CASE WHEN i %% 10 IN (1, 2) THEN NULL ELSE %s END,"
        " printf('q%%d', i %% 3),"
        " CASE WHEN i %% 10 = 0 THEN printf('bench.errors.E%%d', (i / 10) %% 3) END FROM n"
    ),
    "postgresql": (
        "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage, stage_date_ms,"
        " revision, created_at_ms, date_expire, queue_name, error_class) "
        "SELECT %s, '01BENCH' || lpad(i::text, 19, '0'), 'bench.tasks.t' || (i %% 7),"
        " CASE i %% 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'delayed' WHEN 2 THEN 'waiting'"
        " ELSE 'success' END,"
        " %s - i, 2, %s - i - 5,"
        " CASE WHEN i %% 10 IN (1, 2) THEN NULL ELSE %s::bigint END,"
        " 'q' || (i %% 3),"
        " CASE WHEN i %% 10 = 0 THEN 'bench.errors.E' || ((i / 10) %% 3) END"
        " FROM generate_series(1, %s) AS i"
    ),
}


def configure(db: str, directory: str, postgres_url: str) -> None:
    """Django settings for the admin with admin-tools, on a fresh database."""
    import dj_database_url
    import django
    from django.conf import settings

    if db == "sqlite":
        database = {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(Path(directory) / "dashboard.sqlite3"),
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
            },
        }
    else:
        database = dj_database_url.parse(postgres_url)
        recreate_postgres(database)
    urls = types.ModuleType(URLCONF_NAME)
    sys.modules[URLCONF_NAME] = urls
    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench",
        ALLOWED_HOSTS=["testserver"],
        USE_TZ=True,
        ROOT_URLCONF=URLCONF_NAME,
        STATIC_URL="/static/",
        DATABASES={"default": database},
        INSTALLED_APPS=[
            "later_django",
            "admin_tools",
            "admin_tools.theming",
            "admin_tools.menu",
            "admin_tools.dashboard",
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "OPTIONS": {
                    "loaders": [
                        (
                            "django.template.loaders.cached.Loader",
                            [
                                "admin_tools.template_loaders.Loader",
                                "django.template.loaders.app_directories.Loader",
                            ],
                        )
                    ],
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ],
                },
            }
        ],
        ADMIN_TOOLS_INDEX_DASHBOARD="later_django.admin.dashboard.LaterIndexDashboard",
        LATER={"NAMESPACE": NAMESPACE},
        TASKS={"default": {"BACKEND": "later_django.backend.LaterBackend"}},
    )
    django.setup()
    from django.contrib import admin
    from django.urls import include, path

    urls.urlpatterns = [
        path("admin/later_django/", include("later_django.admin.urls")),
        path("admin_tools/", include("admin_tools.urls")),
        path("admin/", admin.site.urls),
    ]
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def recreate_postgres(database: dict) -> None:
    name = database["NAME"].replace('"', '""')
    with admin_connection(database) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')


def drop_postgres(postgres_url: str) -> None:
    import dj_database_url

    database = dj_database_url.parse(postgres_url)
    name = database["NAME"].replace('"', '""')
    with admin_connection(database) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def seed(rows: int) -> float:
    """Writes ``rows`` index rows, a week of queue readings and the counters; seconds taken."""
    from django.db import connection

    from later_django.core.clock import MINUTE_MS, now_ms
    from later_django.storage.stores import stores_for

    now = now_ms()
    expire = now + 7 * 86_400_000
    started = time.perf_counter()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(SEED["sqlite"], [rows, NAMESPACE, now, now, expire])
            cursor.execute("ANALYZE")
        else:
            cursor.execute(SEED["postgresql"], [NAMESPACE, now, now, expire, rows])
            cursor.execute("VACUUM ANALYZE later_jobs_index")
    storage = stores_for("default")
    storage.index.job_index_reconcile_stage_counts(NAMESPACE)
    week = 7 * 24 * 60
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO later_queue_samples (namespace, minute_bucket, queued, partitioned)"
            " VALUES (%s, %s, %s, %s)",
            [
                (NAMESPACE, now // MINUTE_MS - minute, (minute * 37) % 1000, minute % 50)
                for minute in range(week)
            ],
        )
    return time.perf_counter() - started


def job_id(i: int) -> str:
    """The id the seed gives row ``i`` (as the SQL above writes it)."""
    return f"01BENCH{i:019d}"


def seed_records(rows: int, now: int) -> int:
    """Job records for every failed row (3 queues, 3 error classes) and for the newest
    5,000 rows of the other stages, so list pages decode what a real one would;
    returns how many were written."""
    from django.db import connection

    from later_django.core.keys import job_key
    from later_django.core.records import JobError, JobRecord, encode_record

    stage_of = {0: "failed", 1: "delayed", 2: "waiting"}
    written, batch = 0, []
    for i in range(1, rows + 1):
        stage = stage_of.get(i % 10, "success")
        if stage != "failed" and i > 5_000:
            continue
        at = now - i
        record = JobRecord(
            job_id=job_id(i),
            namespace=NAMESPACE,
            task_path=f"bench.tasks.t{i % 7}",
            args=[i],
            kwargs={},
            queue_name=f"q{i % 3}",
            priority=0,
            backend="default",
            stage=stage,
            stage_at_ms=at,
            created_at_ms=at - 5,
            history=[("enqueued", at - 5), ("running", at - 3)]
            if stage in {"success", "failed"}
            else [],
            worker_ids=["bench:1:AAAAAA"] if stage in {"success", "failed"} else [],
            started_at_ms=at - 3,
            finished_at_ms=at if stage in {"success", "failed"} else None,
            run_after_ms=at + 3_600_000 if stage == "delayed" else None,
            errors=[
                JobError(
                    f"bench.errors.E{(i // 10) % 3}",
                    "Traceback (most recent call last):\n  ...\nbench.errors.E: it broke",
                    at,
                    1,
                )
            ]
            if stage == "failed"
            else [],
        )
        batch.append((job_key(NAMESPACE, record.job_id), encode_record(record), at))
        if len(batch) == 5_000:
            written += _insert_records(connection, batch)
            batch = []
    return written + _insert_records(connection, batch)


def _insert_records(connection, batch: list) -> int:  # type: ignore[no-untyped-def]
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO later_storage (key, value, date_created) VALUES (%s, %s, %s)", batch
        )
    return len(batch)


#: The job whose page shows a tree of a hundred continuations.
TREE_PARENT = "01BENCHTREE000000000000000"
TREE_CHILDREN = 100


def seed_tree(now: int) -> None:
    """A finished parent with 100 finished continuations (records and index rows)."""
    from django.db import connection

    from later_django.core.keys import job_key
    from later_django.core.records import JobRecord, encode_record

    ids = [TREE_PARENT] + [f"01BENCHTREECHILD{n:010d}" for n in range(TREE_CHILDREN)]
    records, index_rows = [], []
    for n, tree_id in enumerate(ids):
        parent = None if n == 0 else TREE_PARENT
        record = JobRecord(
            job_id=tree_id,
            namespace=NAMESPACE,
            task_path="bench.tasks.t0",
            args=[],
            kwargs={},
            queue_name="q0",
            priority=0,
            backend="default",
            stage="success",
            stage_at_ms=now,
            created_at_ms=now - 10,
            parent_job_id=parent,
            run_on=None if n == 0 else "success",
        )
        records.append((job_key(NAMESPACE, tree_id), encode_record(record), now))
        index_rows.append(
            (NAMESPACE, tree_id, "bench.tasks.t0", "success", now, 2, now - 10, parent, "q0")
        )
    _insert_records(connection, records)
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage,"
            " stage_date_ms, revision, created_at_ms, parent_job_id, queue_name)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            index_rows,
        )


def seed_task_minutes(now: int) -> int:
    """A week of ``later_task_minute``: each minute, 7 tasks' successes and, for three
    of them, retried and failed attempts of three error classes, all on the ``default``
    queue; returns the rows."""
    from django.db import connection

    from later_django.core.clock import MINUTE_MS

    current = now // MINUTE_MS
    rows = []
    for minute in range(current - 7 * 24 * 60, current + 1):
        for task in range(7):
            path = f"bench.tasks.t{task}"
            rows.append((NAMESPACE, minute, path, "succeeded", "", 6, 40, 40 * 35, 90, ""))
            if task < 3:
                for error in range(3):
                    for outcome in ("retried", "failed"):
                        rows.append(
                            (
                                NAMESPACE,
                                minute,
                                path,
                                outcome,
                                f"bench.errors.E{error}",
                                7,
                                2,
                                2 * 70,
                                80,
                                job_id(10 * (1 + error)),
                            )
                        )
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO later_task_minute (namespace, minute_bucket, task_path, outcome,"
            " error_class, duration_bucket, count, sum_ms, max_ms, sample_job_id, queue_name)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'default')",
            rows,
        )
    return len(rows)


def timed_renders(client, url: str, renders: int, status: int = 200) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Median milliseconds of ``renders`` GETs of ``url`` (after two warm-ups; each must
    answer ``status``), and the number of queries of the last render."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(2):
        response = client.get(url)
        if response.status_code != status:
            raise SystemExit(f"GET {url} answered {response.status_code}")
    timings = []
    for _ in range(renders):
        started = time.perf_counter()
        client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
    with CaptureQueriesContext(connection) as captured:
        client.get(url)
    return round(statistics.median(timings), 2), len(captured.captured_queries)


def deep_cursor(stage: str, pages: int) -> str:
    """The cursor of page ``pages + 1`` of ``stage``, found by walking the pages."""
    from later_django.admin.jobs import PAGE_SIZE
    from later_django.storage.stores import stores_for

    storage = stores_for("default")
    cursor = None
    for _ in range(pages):
        page = storage.index.job_index_list_by_stage(NAMESPACE, stage, cursor, PAGE_SIZE)
        if page.next_cursor is None:
            raise SystemExit(f"stage {stage} has fewer than {pages} pages")
        cursor = page.next_cursor
    return cursor


#: The failed list with each filter: (figure name, query string).
LIST_FILTERS = (
    ("unfiltered", ""),
    ("task", "?task=bench.tasks.t3"),
    ("task_prefix", "?task=bench.tasks.t3*"),
    ("queue", "?queue=q1"),
    ("error", "?error=bench.errors.E2"),
    ("task_and_error", "?task=bench.tasks.t3&error=bench.errors.E2"),
    # Matches nothing: the queue filter index finds no row (issue 32).
    ("queue_matching_nothing", "?queue=nosuch"),
    ("last_hour", "?since=1h"),
)
#: The other pages: (figure name, URL).
PAGES = (
    ("tasks_day_ms", "/admin/later_django/tasks/?range=day"),
    ("tasks_hour_ms", "/admin/later_django/tasks/?range=hour"),
    ("task_detail_day_ms", "/admin/later_django/tasks/bench.tasks.t0/?range=day"),
    ("failures_hour_ms", "/admin/later_django/failures/?range=hour"),
    ("failures_day_ms", "/admin/later_django/failures/?range=day"),
    ("queues_ms", "/admin/later_django/queues/"),
    ("workers_ms", "/admin/later_django/workers/"),
    ("recurring_ms", "/admin/later_django/recurring/"),
)


def run(db: str, rows: int, renders: int) -> list[dict]:
    from urllib.parse import quote

    from django.contrib.auth.models import User
    from django.test import Client

    seconds = seed(rows)
    from later_django.core.clock import now_ms

    now = now_ms()
    started = time.perf_counter()
    records = seed_records(rows, now)
    seed_tree(now)
    minutes = seed_task_minutes(now)
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE later_storage, later_jobs_index, later_task_minute")
    else:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    seconds += time.perf_counter() - started
    print(
        json.dumps(
            {"seeded": db, "index_rows": rows, "records": records, "task_minute_rows": minutes}
        ),
        flush=True,
    )
    user = User.objects.create_superuser("bench", "bench@example.com", "bench")
    client = Client()
    client.force_login(user)
    figures = []

    def figure(name: str, url: str, target: float | None, status: int = 200) -> None:
        value, queries = timed_renders(client, url, renders, status)
        line = {
            "figure": name,
            "db": db,
            "rows": rows,
            "value": value,
            "unit": "ms",
            "target": target,
            "queries": queries,
            "seed_s": round(seconds, 1),
        }
        figures.append(line)
        print(json.dumps(line), flush=True)

    figure("admin_index_ms", "/admin/", 150)
    figure("plain_dashboard_ms", "/admin/later_django/", 150)
    cursor = deep_cursor("success", DEEP_PAGES)
    figure(
        "job_list_deep_ms",
        f"/admin/later_django/jobs/success/?cursor={quote(cursor)}",
        50,
    )
    failed = "/admin/later_django/jobs/failed/"
    for name, query in LIST_FILTERS:
        figure(f"failed_list_{name}_ms", failed + query, 150)
    figure("search_job_id_ms", f"{failed}?q={job_id(500)}", 150, status=302)
    # Text that is no job id becomes a task prefix filter (a redirect to that list).
    figure("search_task_prefix_ms", f"{failed}?q=bench.tasks.t5", 150, status=302)
    figure("job_detail_100_children_ms", f"/admin/later_django/job/{TREE_PARENT}/", 150)
    figure("job_detail_failed_ms", f"/admin/later_django/job/{job_id(10)}/", 150)
    for name, url in PAGES:
        figure(name, url, 150)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--renders", type=int, default=15)
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    args = parser.parse_args()
    if args.db == "all":
        for db in ("sqlite", "postgres"):  # Django is configured once per process
            command = [sys.executable, __file__, "--db", db, "--rows", str(args.rows)]
            command += ["--renders", str(args.renders), "--postgres-url", args.postgres_url]
            subprocess.run(command, check=True)
        return
    with tempfile.TemporaryDirectory(prefix="later-bench-dashboard-") as directory:
        try:
            configure(args.db, directory, args.postgres_url)
            run(args.db, args.rows, args.renders)
        finally:
            from django.db import connections

            connections.close_all()
            if args.db == "postgres":
                drop_postgres(args.postgres_url)


if __name__ == "__main__":
    main()
