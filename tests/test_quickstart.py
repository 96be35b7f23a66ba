"""docs/quickstart.md works as written, in a fresh ``django-admin startproject``, and the
examples of docs/testing-your-tasks.md pass in the project it builds.

Every fenced block of both pages has an HTML comment before it saying what to do with it
(``<!-- quickstart-test: ACTION -->``):

* ``run``: shell commands, run one line at a time in the project (``cd`` moves on;
  ``python`` and ``django-admin`` are this interpreter and its venv's ``django-admin``);
* ``write PATH`` / ``append PATH``: the block becomes / is added to the project's file
  (``append PATH (sqlite)`` or ``(postgres)``: only on that database);
* ``shell``: typed into ``python manage.py shell``; the shell blocks are one session, and
  ``run beside the shell`` blocks run while it is open (a second terminal);
* ``skip (why)``: not run.

The install step (``pip install``) is skipped: the test's interpreter already has
later_django, and ``PYTHONPATH`` points every command at this checkout. On PostgreSQL the
project gets a database of its own, created for the test and dropped after it, whose
name, user, host and port are set after the quickstart's ``DATABASES`` block.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dj_database_url
import django
import pytest

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "docs" / "quickstart.md"
#: The pages run, in order, in one project.
PAGES = (QUICKSTART, ROOT / "docs" / "testing-your-tasks.md")
DJANGO_ADMIN = Path(sys.executable).with_name("django-admin")
MARKER = re.compile(r"<!-- quickstart-test: (?P<action>.+?) -->\s*\Z")
ACTION = re.compile(
    r"(?P<kind>skip|run beside the shell|run|shell|write|append)"
    r"(?: (?P<path>[\w./]+))?(?: \((?P<detail>[^)]*)\))?"
)
#: Runs the ``run beside the shell`` commands from inside the shell session.
SESSION_PRELUDE = """\
import shlex as _shlex, subprocess as _subprocess, sys as _sys
def _quickstart_run(lines):
    for line in lines:
        argv = [_sys.executable if word == "python" else word
                for word in _shlex.split(line, comments=True)]
        if argv:
            _subprocess.run(argv, check=True, timeout=120)
"""
#: What the test checks once the quickstart ran: the admin pages answer, the view enqueues.
CHECKS = """\
from django.contrib.auth.models import User
from django.test import Client
from later_django.conf import later_settings
from later_django.storage.stores import stores_for
from shop.models import Order

client = Client(HTTP_HOST="localhost")
client.force_login(User.objects.create_superuser("qs-admin", "qs@example.com", "qs-pass"))
print("admin-page", client.get("/admin/later_django/").status_code)
answer = client.post("/checkout/", {"email": "ken@example.com", "total": "3.00"})
print("checkout", answer.status_code, Order.objects.filter(email="ken@example.com").count())
settings = later_settings()
print("emails-queue", stores_for(settings.database).queue.depth(settings.namespace, "emails"))
"""


@dataclass(frozen=True)
class Step:
    kind: str
    body: str
    path: str | None = None
    database: str | None = None


def quickstart_steps(text: str) -> list[Step]:
    """The quickstart's blocks in order, each with its action; a block without a
    marker, or with an action this test does not know, fails the test by name."""
    steps: list[Step] = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.match(before)
        first = match.group(2).splitlines()[0] if match.group(2) else ""
        assert marker, f"quickstart block starting {first!r} has no quickstart-test marker"
        action = ACTION.fullmatch(marker.group("action"))
        assert action, f"unknown quickstart-test action {marker.group('action')!r}"
        kind, path, detail = action.group("kind", "path", "detail")
        database = detail if kind in ("write", "append") else None
        steps.append(Step(kind, match.group(2), path, database))
    return steps


class Project:
    """The commands of one quickstart run: a working directory, an environment, a log."""

    def __init__(self, directory: Path) -> None:
        self.cwd = directory
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.log: list[str] = []

    def run_lines(self, body: str) -> str:
        """Runs a ``run`` block line by line; returns what the commands printed."""
        printed = ""
        for line in body.splitlines():
            argv = shlex.split(line, comments=True)
            if argv[:1] == ["cd"]:
                self.cwd = self.cwd / argv[1]
            elif argv:
                printed += self.command(argv)
        return printed

    def command(self, argv: list[str]) -> str:
        program = {"python": sys.executable, "django-admin": str(DJANGO_ADMIN)}
        argv = [program.get(argv[0], argv[0]), *argv[1:]]
        done = subprocess.run(
            argv, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=180
        )
        self.log.append(f"$ {shlex.join(argv)}\n{done.stdout}{done.stderr}")
        assert done.returncode == 0, "\n".join(self.log)
        return done.stdout

    def shell(self, code: str) -> str:
        return self.command(["python", "manage.py", "shell", "-c", code])


def run_pages(project: Project, database: str, database_settings: str) -> str:
    """Runs every step of :data:`PAGES` in order; returns what the commands printed."""
    return "".join(
        run_page(project, page.read_text(encoding="utf-8"), database, database_settings)
        for page in PAGES
    )


def run_page(project: Project, text: str, database: str, database_settings: str) -> str:
    """Runs every step of one page; returns what its commands and shell session printed."""
    session: list[str] = []
    output = ""
    for step in quickstart_steps(text):
        if step.kind == "skip" or step.database not in (None, database):
            continue
        if step.kind in ("write", "append"):
            write_step(project, step, database_settings)
        elif step.kind == "shell":
            session.append(step.body)
        elif step.kind == "run beside the shell":
            session.append(f"_quickstart_run({step.body.splitlines()!r})")
        else:
            if session:  # the shell session ends before a command that does not run beside it
                output += project.shell(SESSION_PRELUDE + "\n".join(session))
                session = []
            output += project.run_lines(step.body)
    if session:
        output += project.shell(SESSION_PRELUDE + "\n".join(session))
    return output


def write_step(project: Project, step: Step, database_settings: str) -> None:
    """A ``write`` or ``append`` step; after a ``DATABASES`` block, the test's own values."""
    assert step.path, f"a {step.kind} marker needs a path: {step}"
    text = f"\n{step.body}\n" if step.kind == "append" else f"{step.body}\n"
    if step.kind == "append" and "DATABASES = " in step.body:
        text += database_settings
    mode = "a" if step.kind == "append" else "w"
    with (project.cwd / step.path).open(mode, encoding="utf-8") as file:
        file.write(text)


@pytest.fixture
def database_settings(db_alias: str) -> Iterator[str]:
    """What the test sets after the quickstart's ``DATABASES``: nothing on SQLite; on
    PostgreSQL a fresh database, dropped afterwards."""
    if db_alias != "postgres":
        yield ""
        return
    import psycopg
    from django.conf import settings

    server = dj_database_url.parse(settings.POSTGRES_URL)
    name = f"test_later_quickstart_{uuid.uuid4().hex[:12]}"
    connect = {
        "dbname": server["NAME"] or "postgres",
        "user": server["USER"],
        "password": server["PASSWORD"],
        "host": server["HOST"],
        "port": server["PORT"] or 5432,
        "autocommit": True,
    }
    with psycopg.connect(**connect) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    overrides = {"NAME": name, **{key: server[key] for key in ("USER", "PASSWORD", "HOST", "PORT")}}
    try:
        yield f'DATABASES["default"].update({overrides!r})\n'
    finally:
        with psycopg.connect(**connect) as connection:
            for database in (name, f"test_{name}"):  # test_…: pytest-django's, in the project
                connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.mark.skipif(
    django.VERSION < (6, 0),
    reason="the quickstart is written for Django 6.x; its section 'On Django 5.2' names the "
    "three lines that differ there (the django52 extra, the django_tasks import, EMAIL_BACKEND)",
)
def test_the_quickstart_runs_as_written_in_a_fresh_project(
    db_alias: str, database_settings: str, tmp_path: Path
) -> None:
    project = Project(tmp_path)
    database = "postgres" if db_alias == "postgres" else "sqlite"

    output = run_pages(project, database, database_settings)

    log = "\n".join(project.log)
    lines = output.splitlines()
    assert "READY" in lines, log
    assert "SUCCESSFUL sent to ada@example.com" in lines, log
    assert re.search(r"\b3 passed\b", output), log  # testing-your-tasks.md's examples
    checks = project.shell(CHECKS).splitlines()
    assert "admin-page 200" in checks, log  # the URL include of step 4
    assert "checkout 201 1" in checks, log
    assert "emails-queue 1" in checks, log
    vendor = project.shell("from django.db import connection; print(connection.vendor)")
    assert vendor.split()[-1] == ("postgresql" if database == "postgres" else "sqlite")


def test_every_quickstart_block_says_what_the_test_does_with_it() -> None:
    steps = [step for page in PAGES for step in quickstart_steps(page.read_text(encoding="utf-8"))]

    kinds = {step.kind for step in steps}
    assert kinds == {"skip", "run", "run beside the shell", "shell", "write", "append"}
    assert {step.path for step in steps if step.kind == "write"} >= {
        "mysite/urls.py",
        "shop/tasks.py",
        "conftest.py",
    }
    with pytest.raises(AssertionError, match="block starting 'x = 1' has no quickstart-test"):
        quickstart_steps("Text\n\n```python\nx = 1\n```\n")
