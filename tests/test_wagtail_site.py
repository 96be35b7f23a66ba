"""A real application's own tasks: the Wagtail site of :mod:`tests.wagtail_site`, set up
as docs/integrations/wagtail.md says, on a SQLite file and on a PostgreSQL database.

Its editor publishes, re-publishes and deletes pages through Wagtail's page API while no
worker runs; ``later_worker --burst`` then runs Wagtail's jobs. The search and reference
indexes must be right, the guide's policy must fold the duplicate index updates and give
up at once (no retries) on the deleted page's jobs, and Wagtail's admin must show the
menu item and the jobs panel to the users allowed to look at jobs, and only to them.

Every step is a subprocess of the site's own settings (``django-admin`` of
``tests.wagtail_site.settings``), so a Wagtail or django-tasks release that breaks the
integration fails here.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.scratch_databases import scratch_database

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = "tests.wagtail_site.settings"
GIVE_UP = "which is in the retry policy's give_up_on"
WAGTAIL_TASKS = {
    "wagtail.tasks.update_reference_index_task",
    "modelsearch.tasks.insert_or_update_object_task",
}


def site(database_url: str, *args: str, settings: str = SETTINGS, exits: int = 0) -> str:
    """Runs ``django-admin *args`` of the Wagtail site on ``database_url``; its stdout (and
    its stderr when it is expected to fail: ``exits``)."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings,
        "WAGTAIL_SITE_DATABASE_URL": database_url,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "django", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    if result.returncode != exits:
        raise AssertionError(
            f"django-admin {' '.join(args)} exited {result.returncode}, not {exits}:\n"
            f"{result.stdout}\n{result.stderr}"
        )
    return result.stdout if exits == 0 else result.stdout + result.stderr


def last_json(output: str) -> Any:
    return json.loads(output.strip().splitlines()[-1])


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new, empty database for the site: a SQLite file, or a PostgreSQL database made
    for the test and dropped after it (skipped when PostgreSQL is unreachable)."""
    from django.conf import settings

    request.node.user_properties.append(("later_database", request.param))
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'wagtail.sqlite3'}"
        return
    if "postgres" not in settings.DATABASES:
        pytest.skip(f"PostgreSQL unreachable: {settings.POSTGRES_PROBLEM}")
    with scratch_database("wagtail") as url:
        yield url


def test_wagtails_tasks_run_with_the_guides_policy(database_url: str) -> None:
    site(database_url, "migrate", "--verbosity", "0")
    edited = last_json(site(database_url, "site_edit", "--articles", "5", "--republish", "2"))
    waiting = edited["waiting"]
    # Nothing ran while the worker was down: every job waits, none is lost.
    assert waiting["stages"]["enqueued"] == edited["jobs"]
    assert waiting["references"] == [] and not any(waiting["found"].values())

    site(database_url, "later_worker", "--burst", "--concurrency", "2")
    report = last_json(site(database_url, "site_report", "--admin"))

    # The indexes are right: every article is found by its own word, and each links to
    # the one before it (the deleted fifth article is gone from both).
    articles = edited["articles"]
    assert report["found"] == {str(pk): [pk] for pk in articles}
    assert report["references"] == [
        [later, earlier] for earlier, later in itertools.pairwise(articles)
    ]

    # Duplicates folded: Wagtail asked for far more jobs than the policy let through,
    # one job per task and object (two tasks for each of the five articles).
    assert edited["enqueues"] > 3 * edited["jobs"], edited
    assert edited["jobs"] == 2 * 5
    jobs = report["jobs"]
    assert len(jobs) == edited["jobs"]
    assert {job["task"] for job in jobs} == WAGTAIL_TASKS
    assert Counter(tuple(job["args"]) for job in jobs).most_common(1)[0][1] == 2
    assert {job["queue"] for job in jobs} == {"wagtail"}

    # The deleted page's two jobs gave up at once, by rule; every other job succeeded.
    failed = [job for job in jobs if job["stage"] == "failed"]
    assert sorted(job["task"] for job in failed) == sorted(WAGTAIL_TASKS)
    for job in failed:
        assert str(job["args"][-1]) == str(edited["deleted"]), job
        assert job["attempts"] == 1 and job["errors"][-1].endswith("ArticlePage.DoesNotExist")
        assert job["reason"].startswith("Gave up at once on attempt 1") and GIVE_UP in job["reason"]
    assert all(
        job["stage"] == "success" and job["attempts"] == 1 for job in jobs if job not in failed
    )
    assert report["stages"]["success"] == 8 and report["stages"]["failed"] == 2
    assert report["failed_last_hour"] == 2

    # Wagtail's admin: the menu item and the panel for the users who may look at jobs.
    seen = report["admin"]
    for name in ("boss", "operator"):
        assert seen[name]["status"] == 200
        assert seen[name]["menu"] and seen[name]["panel"], (name, seen[name])
        assert seen[name]["stages"] == report["stages"]
        assert seen[name]["failed_last_hour"] == [2]
        assert seen[name]["dashboard_status"] == 200
    for name in ("clerk", "editor"):
        assert seen[name]["status"] == 200
        assert not seen[name]["menu"] and not seen[name]["panel"], (name, seen[name])
    assert seen["editor"]["dashboard_status"] == 302  # not staff: the admin's login


def test_a_site_that_forgot_later_django_in_installed_apps_is_told_so(tmp_path: Path) -> None:
    # Wagtail's @task builds the backend while the apps load, which imports later_django's
    # models: they must not stop the process before the check can speak.
    said = site(
        f"sqlite:///{tmp_path / 'unmigrated.sqlite3'}",
        "check",
        settings="tests.wagtail_site.settings_without_later",
        exits=1,
    )
    assert "later_django.E018" in said, said
    assert "Add 'later_django' to INSTALLED_APPS" in said
    assert "explicit app_label" not in said


# --- the contrib app's check, in this process (no Wagtail import needed) ---


def test_the_contrib_app_warns_when_the_dashboard_has_no_address(settings: Any) -> None:
    from later_django.contrib.wagtail.checks import check_setup

    assert check_setup() == []
    settings.ROOT_URLCONF = "tests.wagtail_site.urls_without_dashboard"
    (warning,) = check_setup()
    assert warning.id == "later_django.W004"
    assert "later_django.admin.urls" in warning.msg


def test_the_contrib_app_needs_later_django_installed() -> None:
    from django.test import modify_settings

    from later_django.contrib.wagtail.checks import check_setup

    with modify_settings(INSTALLED_APPS={"remove": ["later_django"]}):
        (error,) = check_setup()
    assert error.id == "later_django.E020"
    assert "'later_django' is not in INSTALLED_APPS" in error.msg
