"""The example project runs: its settings load, it migrates, and it honours DATABASE_URL."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

MANAGE = Path(__file__).resolve().parent.parent / "example_project" / "manage.py"


def manage(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DATABASE_URL": database_url}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_example_project_migrates_a_sqlite_file_in_wal_mode(tmp_path: Path) -> None:
    database = tmp_path / "example.sqlite3"
    url = f"sqlite:///{database}"
    checked = manage("check", "--fail-level", "WARNING", database_url=url)
    assert checked.returncode == 0, checked.stderr
    migrated = manage("migrate", "--verbosity", "0", database_url=url)
    assert migrated.returncode == 0, migrated.stderr
    with sqlite3.connect(database) as connection:
        (journal_mode,) = connection.execute("PRAGMA journal_mode").fetchone()
        tables = {
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'later%'"
            )
        }
    assert journal_mode == "wal"
    assert len(tables) == 21


def test_the_example_project_finds_no_missing_migration(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'example.sqlite3'}"
    result = manage("makemigrations", "--check", "--dry-run", "later_django", database_url=url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No changes detected" in result.stdout


def test_the_example_project_uses_postgresql_from_database_url(postgres_alias: str) -> None:
    from django.conf import settings

    result = manage("showmigrations", "later_django", database_url=settings.POSTGRES_URL)
    assert result.returncode == 0, result.stderr
    assert "0003_postgres_claim_function" in result.stdout
    shown = manage(
        "shell", "-c", "from django.db import connection; print(connection.vendor)",
        database_url=settings.POSTGRES_URL,
    )  # fmt: skip
    assert shown.stdout.strip().splitlines()[-1] == "postgresql"
