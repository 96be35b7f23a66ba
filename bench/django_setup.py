"""Django set-up shared by the benchmarks: one database per process, tables rebuilt.

SQLite is a file (WAL, IMMEDIATE transactions, as recommended to users);
PostgreSQL comes from ``LATER_BENCH_DATABASE_URL`` (default
``postgres://root@127.0.0.1:5432/later_bench``), created when missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_POSTGRES_URL = "postgres://root@127.0.0.1:5432/later_bench"


def configure_django(db: str, sqlite_path: str, *, rebuild_tables: bool) -> None:
    """Configures Django on ``db`` ("sqlite" or "postgres"); with ``rebuild_tables``
    later_django's tables are dropped and migrated again, so every run starts empty."""
    import django
    from django.conf import settings

    if db == "sqlite":
        database = {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": sqlite_path,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
            },
        }
    else:
        import dj_database_url

        database = dj_database_url.parse(
            os.environ.get("LATER_BENCH_DATABASE_URL", DEFAULT_POSTGRES_URL)
        )
        if rebuild_tables:
            ensure_postgres_database(database)
    settings.configure(
        INSTALLED_APPS=["later_django", "django.contrib.contenttypes", "django.contrib.auth"],
        DATABASES={"default": database},
        USE_TZ=True,
    )
    django.setup()
    if rebuild_tables:
        from django.core.management import call_command

        call_command("migrate", "later_django", "zero", verbosity=0)
        call_command("migrate", "later_django", verbosity=0)


def admin_connection(database: dict):  # type: ignore[no-untyped-def]
    """An autocommit psycopg connection to the server's ``postgres`` database, with
    the credentials of the Django ``database`` settings (to create and drop others)."""
    import psycopg

    return psycopg.connect(
        host=database.get("HOST") or None,
        port=database.get("PORT") or None,
        user=database.get("USER") or None,
        password=database.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )


def ensure_postgres_database(database: dict) -> None:
    """Creates the benchmark database when the server does not have it yet."""
    with admin_connection(database) as admin:
        exists = admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [database["NAME"]]
        ).fetchone()
        if not exists:
            name = database["NAME"].replace('"', '""')
            admin.execute(f'CREATE DATABASE "{name}"')
