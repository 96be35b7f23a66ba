"""A database whose later_django migrations were not applied is named as such.

Each case migrates later_django to zero on its database (SQLite file, then
PostgreSQL), so the tables are truly absent, and migrates back afterwards.
Enqueue, ``later_status``, the admin pages and real ``later_worker`` /
``later_maintenance`` processes must say "later_django's tables are missing: run
manage.py migrate" instead of "no such table" (or retrying it forever).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connections, transaction
from django.test import Client, override_settings
from django.urls import reverse

from later_django.exceptions import TablesMissing
from later_django.storage.tables import later_tables, missing_tables, naming_missing_tables
from tests.maintenance.test_processes import REPOSITORY, database_settings
from tests.worker.tasks import record

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

MESSAGE = "later_django's tables are missing: run manage.py migrate"
#: A process that meets the missing tables must exit within this many seconds.
EXIT_SECONDS = 60


@pytest.fixture
def unmigrated(db_alias: str) -> Iterator[str]:
    """The case's database without later_django's tables, where ``LATER`` points."""
    call_command("migrate", "later_django", "zero", database=db_alias, verbosity=0)
    try:
        assert missing_tables(db_alias) == later_tables()
        with override_settings(LATER={"NAMESPACE": "default", "DATABASE": db_alias}):
            yield db_alias
    finally:
        call_command("migrate", "later_django", database=db_alias, verbosity=0)
    assert missing_tables(db_alias) == []


def test_enqueue_names_the_missing_migration(unmigrated: str) -> None:
    with pytest.raises(TablesMissing, match=MESSAGE) as raised:
        record.enqueue("unused", "x")
    assert raised.value.using == unmigrated
    assert "later_storage" in raised.value.missing
    assert f"database {unmigrated!r} has no " in str(raised.value)


def test_enqueue_inside_a_transaction_names_it_too(unmigrated: str) -> None:
    """The failed statement leaves the caller's transaction unusable (PostgreSQL
    aborts it, Django marks the block broken): the check asks on its own connection."""
    with pytest.raises(TablesMissing, match=MESSAGE), transaction.atomic(using=unmigrated):
        record.enqueue("unused", "x")


def test_later_status_names_the_missing_migration(unmigrated: str) -> None:
    with pytest.raises(CommandError, match=MESSAGE):
        call_command("later_status")
    with pytest.raises(CommandError, match=MESSAGE):
        call_command("later_status", "--json", "--check")


def test_later_jobs_names_the_missing_migration(unmigrated: str) -> None:
    with pytest.raises(CommandError, match=MESSAGE):
        call_command("later_jobs", "retry", "--dry-run")


def test_later_queue_names_the_missing_migration(unmigrated: str) -> None:
    with pytest.raises(CommandError, match=MESSAGE):
        call_command("later_queue", "pause", "emails")
    with pytest.raises(CommandError, match=MESSAGE):
        call_command("later_queue", "list")


def test_the_admin_pages_name_the_missing_migration(unmigrated: str) -> None:
    client = Client()
    client.force_login(User.objects.create_user("staff", is_staff=True, is_superuser=True))
    for url in (
        reverse("later_django:dashboard"),
        reverse("later_django:job_list", args=["failed"]),
        reverse("later_django:job_detail", args=["01JOBIDOFNOJOBATALL0000000"]),
    ):
        response = client.get(url)
        assert response.status_code == 503, (url, response.status_code)
        assert MESSAGE in response.content.decode(), url


def run_command(alias: str, *command: str) -> subprocess.CompletedProcess[str]:
    """``python -m django <command>`` on the case's database, to its end."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.maintenance.maintenance_settings",
        "PYTHONPATH": str(REPOSITORY),
        "LATER_WORKER_DATABASE": json.dumps(database_settings(alias)),
    }
    return subprocess.run(
        [sys.executable, "-m", "django", *command],
        env=env,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=EXIT_SECONDS,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["later_worker", "--burst"],
        ["later_worker"],
        ["later_worker", "--processes", "2"],
        ["later_maintenance", "--once"],
        ["later_maintenance"],
    ],
    ids=" ".join,
)
def test_worker_and_maintenance_exit_non_zero_naming_it(unmigrated: str, command) -> None:
    """Without the check these retry "no such table" until the timeout kills them."""
    done = run_command(unmigrated, *command)
    assert done.returncode != 0, done.stderr
    assert MESSAGE in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_another_missing_table_is_not_reported_as_a_missing_migration(db_alias: str) -> None:
    """With later_django's tables present, "no such table" of another table passes
    through unchanged."""
    with (
        pytest.raises(DatabaseError) as raised,
        naming_missing_tables(db_alias),
        connections[db_alias].cursor() as cursor,
    ):
        cursor.execute("SELECT * FROM no_table_of_later_django")
    assert "no_table_of_later_django" in str(raised.value)
