"""later_django's commands describe every option and say their own version."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from django.core.management import ManagementUtility, load_command_class

from later_django import __version__
from tests.maintenance.test_processes import REPOSITORY, database_settings

COMMANDS = ("later_worker", "later_maintenance", "later_status", "later_jobs", "later_queue")


def options_of(name: str) -> list[argparse.Action]:
    parser = load_command_class("later_django", name).create_parser("manage.py", name)
    return [action for action in parser._actions if action.option_strings]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_has_help_text(name: str) -> None:
    options = options_of(name)
    own = {"--concurrency", "--once", "--json", "--dry-run"} & {
        s for a in options for s in a.option_strings
    }
    assert own, "the command's own options were not found"
    missing = [
        "/".join(action.option_strings)
        for action in options
        if not action.help or action.help == argparse.SUPPRESS or not action.help.strip()
    ]
    assert missing == [], f"{name}: options without --help text: {missing}"


@pytest.mark.parametrize("name", COMMANDS)
def test_version_is_later_djangos(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        ManagementUtility(["manage.py", name, "--version"]).execute()
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"later_django {__version__} (Django ")


def test_version_from_the_command_line(db_alias: str) -> None:
    """The real ``manage.py later_worker --version``, set up on the case's database."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.maintenance.maintenance_settings",
        "PYTHONPATH": str(REPOSITORY),
        "LATER_WORKER_DATABASE": json.dumps(database_settings(db_alias)),
    }
    done = subprocess.run(
        [sys.executable, "-m", "django", "later_worker", "--version"],
        env=env,
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"later_django {__version__} (Django "), done.stdout
