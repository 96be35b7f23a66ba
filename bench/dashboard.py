"""Dashboard at scale: the admin index and a deep job-list page with 1,000,000 jobs.

Seeds ``--rows`` (default 1,000,000) jobs straight into ``later_jobs_index`` of a
dedicated database with one bulk ``INSERT … SELECT`` (70 % success, 10 % failed,
10 % delayed, 10 % waiting; finished rows unexpired), recounts the stage
counters, records a week of queue-length readings, then renders through
Django's test client, logged in as a superuser:

* ``admin_index_ms``: ``/admin/``, the django-admin-tools index dashboard with
  later_django's panels (target ≤ 150 ms);
* ``plain_dashboard_ms``: ``/admin/later_django/``, the same panels without admin-tools;
* ``job_list_deep_ms``: ``/admin/later_django/jobs/success/?cursor=…``, the page
  100 pages (5,000 jobs) deep, its cursor found by walking the pages first
  (target ≤ 50 ms).

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
        " revision, created_at_ms, date_expire) "
        "SELECT %s, printf('01BENCH%%019d', i), 'bench.tasks.noop',"
        " CASE i %% 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'delayed' WHEN 2 THEN 'waiting'"
        " ELSE 'success' END,"
        " %s - i, 2, %s - i - 5,"
        " CASE WHEN i %% 10 IN (1, 2) THEN NULL ELSE %s END FROM n"
    ),
    "postgresql": (
        "INSERT INTO later_jobs_index (namespace, job_id, payload_type, stage, stage_date_ms,"
        " revision, created_at_ms, date_expire) "
        "SELECT %s, '01BENCH' || lpad(i::text, 19, '0'), 'bench.tasks.noop',"
        " CASE i %% 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'delayed' WHEN 2 THEN 'waiting'"
        " ELSE 'success' END,"
        " %s - i, 2, %s - i - 5,"
        " CASE WHEN i %% 10 IN (1, 2) THEN NULL ELSE %s::bigint END"
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


def timed_renders(client, url: str, renders: int) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Median milliseconds of ``renders`` GETs of ``url`` (after two warm-ups), and
    the number of queries of the last render."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(2):
        response = client.get(url)
        if response.status_code != 200:
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


def run(db: str, rows: int, renders: int) -> list[dict]:
    from urllib.parse import quote

    from django.contrib.auth.models import User
    from django.test import Client

    seconds = seed(rows)
    user = User.objects.create_superuser("bench", "bench@example.com", "bench")
    client = Client()
    client.force_login(user)
    figures = []

    def figure(name: str, url: str, target: float | None) -> None:
        value, queries = timed_renders(client, url, renders)
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
