"""The fault suite's choice of cell runs by ``--db`` and the MariaDB target's settings
(chaos/__main__.py, chaos/databases.py): pure, no database, no process."""

from __future__ import annotations

import argparse

import pytest

from chaos.__main__ import main, selected
from chaos.cells import CELLS, VENDORS
from chaos.databases import Target


def runs(*argv: str) -> tuple[set[tuple[str, str]], list[str]]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="short")
    parser.add_argument("--cell", action="append")
    parser.add_argument("--db", action="append")
    pairs, skipped = selected(parser.parse_args(argv))
    return {(cell.name, kind) for cell, kind in pairs}, skipped


def test_without_db_the_short_profile_runs_sqlite_and_postgres_only() -> None:
    pairs, skipped = runs()
    assert {VENDORS[kind] for _, kind in pairs} == {"sqlite", "postgres"}
    assert not skipped


def test_db_mariadb_runs_every_mariadb_cell_and_says_why_the_others_do_not() -> None:
    pairs, skipped = runs("--db", "mariadb")
    assert pairs == {
        ("sigkill", "mariadb"),
        ("fan_in", "mariadb"),
        ("poison", "mariadb"),
        ("mariadb_kill", "mariadb"),
        ("mariadb_restart", "mariadb_server"),
        ("mariadb_snapshot", "mariadb_server"),
        ("mariadb_max_connections", "mariadb_server"),
    }
    assert [line.split("[")[0] for line in skipped] == [
        "pg_restart",
        "pg_terminate",
        "snapshot_pin",
        "sqlite_lock_storm",
        "max_connections",
    ]
    assert all("skipped: " in line and not line.endswith(": ") for line in skipped)


def test_every_cell_without_a_mariadb_run_gives_its_reason() -> None:
    for cell in CELLS:
        if not any(VENDORS[kind] == "mariadb" for kind in cell.databases):
            assert cell.not_on_mariadb, cell.name


def test_db_repeats() -> None:
    pairs, _ = runs("--db", "sqlite", "--db", "mariadb", "--cell", "sigkill")
    assert pairs == {("sigkill", "sqlite"), ("sigkill", "mariadb")}


def test_workers_connect_as_a_user_of_their_own_with_the_recommended_options() -> None:
    target = Target("mysql", "chaos_1_ab", "127.0.0.1", 3306, "chaos_12345678", "root", "pw")
    worker, enqueuer = target.django("worker"), target.django("enqueuer")
    assert worker["ENGINE"] == "django.db.backends.mysql"
    assert worker["USER"] == "chaos_12345678_worker"
    assert enqueuer["USER"] == target.django("agent")["USER"] == "chaos_12345678_app"
    assert worker["OPTIONS"]["isolation_level"] == "read committed"
    assert worker["OPTIONS"]["charset"] == "utf8mb4"


def test_help_names_the_vendors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "{mariadb,postgres,sqlite}" in capsys.readouterr().out
