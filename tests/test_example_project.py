"""The example project runs: its settings load, it migrates, it honours DATABASE_URL, and
the demo (bin/demo, its page, its commands) works."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.apps import apps

from tests.browser.example_site import (
    Browserless,
    example_environment,
    free_port,
    poll,
    stop,
    wait_for_page,
)
from tests.browser.example_site import manage as example_manage
from tests.scratch_databases import mariadb_scratch_database, scratch_database

ROOT = Path(__file__).resolve().parent.parent
MANAGE = ROOT / "example_project" / "manage.py"


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
    later_models = apps.get_app_config("later_django").get_models()
    assert tables == {model._meta.db_table for model in later_models}


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


# --- the demo: bin/demo, the demo app's commands ---


def children_of(pid: int) -> dict[int, str]:
    """``{pid: command line}`` of the live children of ``pid`` (read from /proc)."""
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        # The parent pid is the 2nd field after the ")" closing the command name.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children[int(entry.name)] = cmdline
    return children


def listening_addresses(port: int) -> set[str]:
    """The local IPv4/IPv6 addresses (hex, as /proc/net shows them) listening on ``port``."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                addresses.add(address)
    return addresses


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_bin_demo_serves_the_demo_page_runs_a_job_and_stops_on_sigint(tmp_path: Path) -> None:
    port = free_port()
    environment = {
        **os.environ,
        "DEMO_PORT": str(port),
        "DEMO_DATABASE": str(tmp_path / "demo.sqlite3"),
        "DEMO_PYTHON": sys.executable,
    }
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    environment.pop("DATABASE_URL", None)
    log = tmp_path / "demo.log"
    base = f"http://127.0.0.1:{port}"
    with log.open("w") as output:
        demo = subprocess.Popen(
            [str(ROOT / "bin" / "demo")],
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # A shell inherits an ignored SIGINT (pytest started in the background) and
            # then cannot trap it; the terminal's Ctrl-C this test stands for is not ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        page = wait_for_page(f"{base}/", demo)
        children = children_of(demo.pid)
        printed = log.read_text()
        client = Browserless(base)
        after_post = client.post_form("/", "/enqueue/one/")
        poll(lambda: "SUCCESSFUL" in client.get("/"), "the demo's worker runs the job")
        addresses = listening_addresses(port)
    finally:
        exit_code = stop(demo, signal.SIGINT)
    assert "later_django demo" in page
    assert sorted("later_worker" in line for line in children.values()) == [False, True]
    assert sum("runserver" in line for line in children.values()) == 1
    assert f"{base}/" in printed and f"{base}/admin/" in printed
    assert "demo / demo-password" in printed
    assert "Enqueued one job" in after_post
    assert addresses == {"0100007F"}  # 127.0.0.1 only
    assert exit_code == 0, log.read_text()
    assert "Stopped." in log.read_text()
    assert not any(is_alive(pid) for pid in children)


def test_demo_superuser_is_idempotent_and_prints_the_credentials(tmp_path: Path) -> None:
    database = tmp_path / "demo.sqlite3"
    example_manage(database, "migrate", "--verbosity", "0")
    first = example_manage(database, "demo_superuser")
    second = example_manage(database, "demo_superuser")
    count = example_manage(
        database,
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        "print(User.objects.filter(username='demo', is_superuser=True).count())",
    )
    assert "created: demo / demo-password" in first.stdout
    assert "already present" in second.stdout
    assert count.stdout.strip().splitlines()[-1] == "1"


def test_demo_seed_leaves_jobs_enqueued_partitioned_delayed_succeeded_and_failed(
    tmp_path: Path,
) -> None:
    database = tmp_path / "demo.sqlite3"
    example_manage(database, "migrate", "--verbosity", "0")
    example_manage(
        database, "demo_seed", "--succeeded", "7", "--failed", "3", "--enqueued", "5",
        "--delayed", "4", "--orders", "6",
    )  # fmt: skip
    shown = example_manage(
        database,
        "shell",
        "-c",
        "import json; from demo.status import stage_counts; "
        "from later_django.models import QueueSample; "
        "print(json.dumps([dict(stage_counts()), QueueSample.objects.count()]))",
    )
    counts, samples = json.loads(shown.stdout.strip().splitlines()[-1])
    assert counts == {
        "delayed": 4, "waiting": 0, "enqueued": 11, "running": 0, "requeued": 0,
        "success": 7, "failed": 3,
    }  # fmt: skip
    assert samples >= 60


def test_make_demo_fails_loudly_without_python_3_12(tmp_path: Path) -> None:
    fakes = tmp_path / "bin"
    fakes.mkdir()
    for name in ("python", "python3", "python3.12", "python3.13"):
        fake = fakes / name
        fake.write_text("#!/bin/sh\nexit 1\n")  # answers every version probe with "too old"
        fake.chmod(0o755)
    environment = {
        "PATH": f"{fakes}:/usr/bin:/bin",
        "HOME": str(tmp_path),  # no ~/.pyenv
        "DEMO_PORT": str(free_port()),
        "DEMO_DATABASE": str(tmp_path / "never.sqlite3"),
    }
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "demo", f"VENV={tmp_path / 'venv'}"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "needs Python 3.12 or newer" in result.stderr
    assert not (tmp_path / "venv").exists()
    assert not (tmp_path / "never.sqlite3").exists()


SEED_COUNTS = """
import json
from demo.status import stage_counts
from django.db import connection
print(json.dumps([connection.vendor, dict(stage_counts())]))
"""


def test_the_demo_seeds_and_runs_jobs_on_postgresql(postgres_alias: str) -> None:
    with scratch_database("example") as url:
        migrated = manage("migrate", "--verbosity", "0", database_url=url)
        seeded = manage(
            "demo_seed", "--succeeded", "6", "--failed", "2", "--enqueued", "3",
            "--delayed", "1", "--orders", "4", database_url=url,
        )  # fmt: skip
        shown = manage("shell", "-c", SEED_COUNTS, database_url=url)
    assert migrated.returncode == 0, migrated.stderr
    assert seeded.returncode == 0, seeded.stderr
    vendor, counts = json.loads(shown.stdout.strip().splitlines()[-1])
    assert vendor == "postgresql"
    assert counts == {
        "delayed": 1, "waiting": 0, "enqueued": 7, "running": 0, "requeued": 0,
        "success": 6, "failed": 2,
    }  # fmt: skip


REPORT_JOB = """
import json
from demo import actions, tasks
from later_django.engine.registry import resolve_task
registered = resolve_task("demo.tasks.long_report") is tasks.long_report
defaults = [tasks.REPORT_STEPS, tasks.REPORT_STEP_SECONDS]
# Ten minutes of 0.1 s steps: only a cancel ends it within this test.
job = tasks.long_report.enqueue(6000, 0.1)
print(json.dumps([registered, "report" in actions.ACTIONS, defaults, job.id]))
"""

REPORT_STATE = """
import json
from later_django.compat.tasks import default_task_backend
result = default_task_backend.get_result({job_id!r})
last = result.errors[-1].exception_class_path if result.errors else None
print(json.dumps([result.status.name, last]))
"""


def report_state(database: Path, job_id: str) -> tuple[str, str | None]:
    shown = example_manage(database, "shell", "-c", REPORT_STATE.format(job_id=job_id))
    status, last_error = json.loads(shown.stdout.strip().splitlines()[-1])
    return status, last_error


def test_the_demo_report_runs_long_and_stops_when_cancelled_on_a_real_worker(
    tmp_path: Path,
) -> None:
    """The demo's task to try Cancel… on: registered, on the page's buttons, a minute
    long by default, and a real worker records it cancelled soon after the request."""
    database = tmp_path / "demo.sqlite3"
    example_manage(database, "migrate", "--verbosity", "0")
    made = example_manage(database, "shell", "-c", REPORT_JOB)
    registered, has_button, defaults, job_id = json.loads(made.stdout.strip().splitlines()[-1])
    log = tmp_path / "worker.log"
    with log.open("w") as output:
        worker = subprocess.Popen(
            [sys.executable, str(MANAGE), "later_worker", "--concurrency", "1"],
            env=example_environment(database),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        poll(lambda: report_state(database, job_id)[0] == "RUNNING", "the report starts")
        cancel = f"from later_django import api; print(api.cancel({job_id!r}))"
        asked = example_manage(database, "shell", "-c", cancel)
        asked_at = time.monotonic()
        final = poll(
            lambda: (state := report_state(database, job_id))[0] != "RUNNING" and state,
            "the cancelled report stops",
        )
        stopped_after = time.monotonic() - asked_at
    finally:
        worker_exit = stop(worker, signal.SIGTERM)
    assert [registered, has_button, defaults] == [True, True, [60, 1.0]]
    assert asked.stdout.strip().splitlines()[-1] == "requested"
    assert final == ("FAILED", "later_django.exceptions.JobCancelled")
    assert stopped_after < 30, "stopped by the cancel, not by running out of steps"
    assert worker_exit == 0, log.read_text()


# --- MariaDB/MySQL (issue 36): DATABASE_URL=mysql://... end to end ---

ENQUEUE_GREETING = """
from demo import tasks
print(tasks.greet.enqueue("mariadb").id)
"""

MARIADB_PAGES = """
import json
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from later_django.compat.tasks import default_task_backend
job_id = {job_id!r}
with connection.cursor() as cursor:
    cursor.execute("SELECT @@tx_isolation, @@character_set_connection")
    session = list(cursor.fetchone())
client = Client(HTTP_HOST="127.0.0.1")
client.force_login(User.objects.create_superuser("admin", "admin@example.com", "not-used"))
pages = [
    "/", "/admin/", "/admin/later_django/", "/admin/later_django/jobs/success/",
    f"/admin/later_django/job/{{job_id}}/", "/admin/later_django/queues/",
    "/admin/later_django/workers/", "/admin/later_django/tasks/",
]
codes = {{page: client.get(page).status_code for page in pages}}
result = default_task_backend.get_result(job_id)
print(json.dumps([connection.vendor, session, result.status.name, result.return_value, codes]))
"""


def test_the_example_project_runs_a_job_and_its_admin_on_mariadb(
    request: pytest.FixtureRequest,
) -> None:
    """``DATABASE_URL=mysql://...``: the settings give READ COMMITTED and utf8mb4, it
    migrates, a job enqueued runs on ``later_worker --burst``, the admin pages load."""
    from django.conf import settings

    request.node.user_properties.append(("later_database", "mariadb"))  # the summary's count
    if "mariadb" not in settings.DATABASES:
        pytest.skip(f"MariaDB unreachable: {settings.MARIADB_PROBLEM}")
    with mariadb_scratch_database("example") as url:
        migrated = manage("migrate", "--verbosity", "0", database_url=url)
        assert migrated.returncode == 0, migrated.stderr
        enqueued = manage("shell", "-c", ENQUEUE_GREETING, database_url=url)
        assert enqueued.returncode == 0, enqueued.stderr
        job_id = enqueued.stdout.strip().splitlines()[-1]
        worked = manage("later_worker", "--burst", database_url=url)
        shown = manage("shell", "-c", MARIADB_PAGES.format(job_id=job_id), database_url=url)
    assert worked.returncode == 0, worked.stderr
    assert shown.returncode == 0, shown.stderr
    vendor, session, status, returned, codes = json.loads(shown.stdout.strip().splitlines()[-1])
    assert [vendor, session, status] == ["mysql", ["READ-COMMITTED", "utf8mb4"], "SUCCESSFUL"]
    assert "mariadb" in returned
    assert codes == dict.fromkeys(codes, 200)
