"""``later_status``: the report, its ``--json`` shape, and ``--check``'s exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from later_django.core.clock import now_ms
from later_django.management.commands.later_status import EXIT_READY_TOO_OLD, EXIT_TOO_FEW_WORKERS
from later_django.overview.figures import STAGES
from later_django.overview.snapshot import read_overview
from later_django.storage.stores import stores_for
from later_django.storage.types import WorkerRow
from tests.admin.support import seed_jobs
from tests.engine import tasks

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def status(*args: str) -> str:
    out = StringIO()
    call_command("later_status", *args, stdout=out)
    return out.getvalue()


def beat(alias: str, worker_id: str = "w1", *, at_ms: int | None = None) -> None:
    at = now_ms() if at_ms is None else at_ms
    stores_for(alias).executions.worker_heartbeat(
        "default",
        WorkerRow(worker_id, "host-a", 4242, 4, ["default", "emails"], 1, at - 1000, at),
    )


def test_the_report_shows_stages_queues_workers_partitions_and_recurring(later_db: str) -> None:
    seed_jobs()
    beat(later_db)
    text = status()
    lines = text.splitlines()
    assert any(line.split()[:2] == ["success", "3"] for line in lines), text
    assert any(line.split()[:2] == ["failed", "1"] for line in lines), text
    assert any(line.split()[:2] == ["enqueued", "3"] for line in lines), text
    assert any(line.split()[:2] == ["default", "3"] for line in lines), text
    assert any("host-a" in line and "4242" in line for line in lines), text
    assert "partitions:\n  none configured" in text
    assert "recurring:\n  none configured" in text
    assert "database size:" in text


def test_json_has_the_documented_shape(later_db: str) -> None:
    seed_jobs()
    beat(later_db)
    document = json.loads(status("--json"))
    assert set(document) == {
        "namespace",
        "database",
        "now_ms",
        "stages",
        "throughput_last_minute",
        "waits",
        "queues",
        "oldest_ready_age_ms",
        "workers",
        "topics",
        "recurring",
        "consumer_lags",
        "db_size_bytes",
        "workflows",
    }
    assert document["workflows"] == {"running": 0, "failed": 0, "cancelled": 0, "succeeded": 0}
    assert "workflows: running 0, failed 0, cancelled 0, succeeded 0" in status()
    assert list(document["stages"]) == sorted(STAGES) or set(document["stages"]) == set(STAGES)
    assert document["stages"]["success"] == {"count": 3}
    assert document["queues"][0]["queue_name"] == "default"
    assert document["queues"][0]["ready"] == 3
    assert document["workers"][0]["pid"] == 4242
    assert set(document["waits"]) == {"regular", "sequential"}
    assert document["topics"] == [] and document["recurring"] == []
    assert document["database"] == later_db


def test_check_fails_without_a_live_worker(later_db: str) -> None:
    beat(later_db, at_ms=now_ms() - 10 * 60_000)  # a dead worker's stale row
    with pytest.raises(CommandError) as failed:
        status("--check")
    assert failed.value.returncode == EXIT_TOO_FEW_WORKERS == 3
    assert "no live worker" in str(failed.value)


def test_check_counts_live_workers_against_min_workers(later_db: str) -> None:
    beat(later_db)
    assert "check: healthy" in status("--check", "--min-workers", "1")
    with pytest.raises(CommandError) as failed:
        status("--check", "--min-workers", "2")
    assert failed.value.returncode == 3
    assert "fewer than 2 live workers" in str(failed.value)
    assert "1 sent a heartbeat" in str(failed.value)


def test_check_passes_with_a_live_worker_and_an_empty_queue(later_db: str) -> None:
    beat(later_db)
    assert "check: healthy" in status("--check")
    document = json.loads(status("--check", "--json"))
    assert document["check"] == {"healthy": True, "problems": []}


def test_check_fails_when_the_oldest_ready_job_is_older_than_max_age(later_db: str) -> None:
    beat(later_db)
    tasks.add.enqueue(1, 2)
    deadline = time.monotonic() + 30
    while (read_overview().oldest_ready_age_ms or 0) < 5:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    assert "check: healthy" in status("--check", "--max-age", "60")
    with pytest.raises(CommandError) as failed:
        status("--check", "--max-age", "0.001")
    assert failed.value.returncode == EXIT_READY_TOO_OLD == 4
    assert "oldest ready job has waited" in str(failed.value)
    with pytest.raises(CommandError) as both:
        status("--check", "--max-oldest-ready-age", "0.001", "--min-workers", "5")
    # Both named; the status is the first's.
    assert both.value.returncode == 3
    assert "fewer than 5 live workers" in str(both.value)
    assert "--max-oldest-ready-age 0.001 s" in str(both.value)


def test_check_exits_non_zero_from_the_shell(sqlite_alias: str) -> None:
    """The exit code a container health check sees (a fresh SQLite database without
    any worker)."""
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    script = (
        "import django, sys; django.setup();"
        "from django.core.management import call_command, execute_from_command_line;"
        "call_command('migrate', verbosity=0, database='default');"
        "execute_from_command_line(['manage.py', 'later_status', '--check'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**environment, "LATER_TEST_SQLITE_DIR": str(_fresh_directory())},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert "no live worker" in done.stderr


def _fresh_directory():
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix="later-status-"))
