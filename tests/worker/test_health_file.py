"""``later_worker --health-file``: the liveness file is touched while the loop turns,
also while PostgreSQL is down (a throwaway cluster of the test's own, stopped and
started again), and stops being touched when the worker hangs (SIGSTOP); under
``--processes 2`` one hung child is enough to stop the supervisor's file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from chaos.cluster import throwaway_cluster
from later_django.worker.health_file import CHILD_STALE_SECONDS
from tests.worker.test_worker_process import (
    REPOSITORY,
    START_SECONDS,
    Workers,
    row_of,
    wait_for,
    worker_rows,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: The longest a turning worker leaves its file alone: the database back-off's longest
#: wait (5 s, +20 % jitter) and the touch's own throttle (1 s), with a margin.
LONGEST_GAP_SECONDS = 8.0


def age(path: Path) -> float:
    return time.time() - path.stat().st_mtime


def most_age_over(path: Path, seconds: float) -> float:
    """The file's largest age sampled every 0.2 s for ``seconds``."""
    deadline, most = time.monotonic() + seconds, 0.0
    while time.monotonic() < deadline:
        most = max(most, age(path))
        time.sleep(0.2)
    return most


def test_the_file_is_touched_while_the_worker_turns_and_not_once_it_hangs(
    alias: str, workers: Workers, tmp_path: Path
) -> None:
    health = tmp_path / "alive"
    worker = workers.start(alias, "--health-file", str(health))
    wait_for(lambda: row_of(alias, worker.pid), START_SECONDS, "worker row", workers)
    assert most_age_over(health, 3) < 2.5
    worker.send(signal.SIGSTOP)
    try:
        time.sleep(3.5)
        assert age(health) > 3.0, "a hung worker must not look alive"
    finally:
        worker.send(signal.SIGCONT)
    assert most_age_over(health, 2) < 2.5 or age(health) < 2.5


def test_a_supervisor_touches_its_file_only_while_every_child_touches_its_own(
    sqlite_alias: str, workers: Workers, tmp_path: Path
) -> None:
    """On SQLite only: the files are the same whatever the database."""
    alias = sqlite_alias
    health = tmp_path / "alive"
    supervisor = workers.start(alias, "--processes", "2", "--health-file", str(health))
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two children", workers)
    assert most_age_over(health, 2.5) < 2.5
    child = worker_rows(alias)[0]["pid"]
    assert (tmp_path / f"alive.{child}").exists()
    os.kill(child, signal.SIGSTOP)
    try:
        time.sleep(CHILD_STALE_SECONDS + 3)
        assert age(health) > 2.0, "one hung child must turn the probe red"
    finally:
        os.kill(child, signal.SIGCONT)
    wait_for(lambda: age(health) < 2.0, 10, "the file touched again", workers)
    assert supervisor.alive()


def migrate(database: dict) -> None:
    """Creates later_django's tables on ``database`` (the worker settings' migrate)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.worker.worker_settings",
        "PYTHONPATH": str(REPOSITORY),
        "LATER_WORKER_DATABASE": json.dumps(database),
    }
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--verbosity", "0"],
        env=env,
        cwd=REPOSITORY,
        check=True,
        timeout=120,
    )


def test_the_file_stays_fresh_while_postgresql_is_down(
    postgres_alias: str, workers: Workers, tmp_path: Path
) -> None:
    """A liveness probe must not restart a fleet of workers during a database outage."""
    with throwaway_cluster() as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as connection:
            connection.execute("CREATE DATABASE later_health")
        database = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "later_health",
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": str(cluster.port),
        }
        migrate(database)
        health = tmp_path / "alive"
        worker = workers.start(postgres_alias, "--health-file", str(health), database=database)
        wait_for(health.exists, START_SECONDS, "the health file", workers)
        assert most_age_over(health, 2) < 2.5
        cluster.ctl("stop", "-m", "fast")
        try:
            assert most_age_over(health, 10) < LONGEST_GAP_SECONDS
            assert worker.alive()
            assert "database error" in worker.log()
        finally:
            cluster.ctl("start")
        cluster.wait_ready()
        assert most_age_over(health, 3) < LONGEST_GAP_SECONDS
        assert worker.alive()
        worker.send(signal.SIGTERM)
        assert worker.wait_exit(20) == 0, worker.describe()
