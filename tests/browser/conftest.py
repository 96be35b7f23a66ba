"""Fixtures of the browser tests: Debian's chromium driven by Playwright, and the example
project served on a free loopback port against a temporary SQLite file.

The tests are skipped only when chromium is absent and
``LATER_REQUIRE_BROWSER`` is unset; ``.ci/run`` sets it, so there they fail instead.
Playwright never downloads a browser here: it launches ``/usr/bin/chromium``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser.example_site import ROOT, dev_server, free_port, manage
from tests.browser.login import PASSWORD, USERNAME

CHROMIUM = "/usr/bin/chromium"
OUTPUT = ROOT / "test-output" / "browser"
TIMEOUT_MS = 60_000
QUICK_REFRESH_SETTINGS = "tests.browser.quick_refresh_settings"


def _missing(reason: str) -> None:
    if os.environ.get("LATER_REQUIRE_BROWSER"):
        pytest.fail(f"LATER_REQUIRE_BROWSER is set but {reason}", pytrace=False)
    pytest.skip(f"{reason} (set LATER_REQUIRE_BROWSER=1 to make this an error)")


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The chromium binary; skips (or fails under LATER_REQUIRE_BROWSER) without one."""
    if not os.access(CHROMIUM, os.X_OK):
        found = shutil.which("chromium")
        if found is None:
            _missing(f"no chromium at {CHROMIUM} or on PATH (apt-get install -y chromium)")
        return found
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[object]:
    """One headless chromium for the test module.

    Not for the session: Playwright's sync API runs an asyncio loop in the thread while
    it is open, and Django refuses database access from a thread with a running loop
    (``SynchronousOnlyOperation``). Run serially the browser tests come last
    (pytest-django puts tests without a database after the others); under pytest-xdist
    a worker may run database tests after a browser file, so the loop ends with it."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # part of the test extra: never a reason to skip
        pytest.fail("Playwright is not installed: pip install -e '.[test]'", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    """A fresh page (own cookies) of 1280 x 900 with 60 s timeouts."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@dataclass(frozen=True)
class Site:
    """A running example project: its base URL and its SQLite file (or its database's
    URL: ``test_mariadb_walk.py``)."""

    base: str
    database: Path | str


@pytest.fixture(scope="session")
def migrated_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example project's SQLite database, migrated and with the demo superuser,
    made once per pytest process: each site starts from a copy (:func:`_site`), which
    saves two Django start-ups a site."""
    database = tmp_path_factory.mktemp("example-template") / "example.sqlite3"
    manage(database, "migrate", "--verbosity", "0")
    manage(database, "demo_superuser", "--username", USERNAME, "--password", PASSWORD)
    return database


def _copy(template: Path, directory: Path) -> Path:
    """``directory/example.sqlite3``: a copy of ``template`` (and of its WAL, if one
    was left)."""
    database = directory / "example.sqlite3"
    for suffix in ("", "-wal"):
        source = template.with_name(template.name + suffix)
        if source.exists():
            shutil.copyfile(source, database.with_name(database.name + suffix))
    return database


def _site(
    template: Path, directory: Path, *, seed: bool, settings: str | None = None
) -> Iterator[Site]:
    database = _copy(template, directory)
    if seed:
        manage(database, "demo_seed")
    with dev_server(database, free_port(), directory / "runserver.log", settings) as base:
        yield Site(base, database)


@pytest.fixture(scope="module")
def seeded_site(
    tmp_path_factory: pytest.TempPathFactory, chromium_path: str, migrated_example: Path
) -> Iterator[Site]:
    """The example project after ``demo_seed`` (30 succeeded, 5 failed, 40 enqueued,
    15 delayed, an hour of queue readings), with no worker: the stages stay put."""
    yield from _site(migrated_example, tmp_path_factory.mktemp("seeded"), seed=True)


@pytest.fixture
def empty_site(tmp_path: Path, chromium_path: str, migrated_example: Path) -> Iterator[Site]:
    """The example project with no job yet, for tests that change the stages."""
    yield from _site(migrated_example, tmp_path, seed=False)


@pytest.fixture
def quick_refresh_site(
    tmp_path: Path, chromium_path: str, migrated_example: Path
) -> Iterator[Site]:
    """Like ``empty_site``, with the live refresh every second instead of every 5
    (:mod:`tests.browser.quick_refresh_settings`): the refresh tests wait on its timer."""
    yield from _site(migrated_example, tmp_path, seed=False, settings=QUICK_REFRESH_SETTINGS)


@pytest.fixture(scope="session")
def output_directory() -> Path:
    """``test-output/browser/`` (git-ignored), where screenshots go."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    return OUTPUT
