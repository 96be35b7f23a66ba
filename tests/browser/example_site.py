"""Run the example project in subprocesses for tests: manage.py, a dev server, polling.

Everything binds 127.0.0.1 only and runs against a SQLite file the test chooses, or a
scratch database of a server (``DATABASE_URL``), never the project's own ``db.sqlite3``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "example_project" / "manage.py"
#: Generous: two shared cores, other test runs beside this one.
DEADLINE_SECONDS = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def database_url(database: Path | str) -> str:
    """``DATABASE_URL`` for ``database``: a SQLite file's path, or a URL already (a
    server's scratch database, e.g. MariaDB's in ``test_mariadb_walk.py``)."""
    return database if isinstance(database, str) else f"sqlite:///{database}"


def example_environment(database: Path | str, settings: str | None = None) -> dict[str, str]:
    """The environment of an example-project process on ``database`` (a SQLite file,
    or a database URL), with the project's own settings or the module ``settings`` (a
    module of this repository's, e.g. :mod:`tests.browser.quick_refresh_settings`)."""
    environment = {**os.environ, "DATABASE_URL": database_url(database), "PYTHONUNBUFFERED": "1"}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    if settings is not None:
        environment["DJANGO_SETTINGS_MODULE"] = settings
        environment["PYTHONPATH"] = str(ROOT)
    return environment


def manage(
    database: Path | str, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Runs ``manage.py *args`` of the example project on ``database``; raises if it fails."""
    result = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env=example_environment(database),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"manage.py {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout}\n{result.stderr}"
        )
    return result


def wait_for_page(url: str, process: subprocess.Popen | None = None) -> str:
    """Polls ``url`` until it answers 200 (returns the body) or the deadline passes.

    Fails early, with the process's output, when ``process`` exits meanwhile.
    """
    deadline = time.monotonic() + DEADLINE_SECONDS
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"exited {process.returncode} before {url} answered:\n{output}")
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            last_error = error
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {DEADLINE_SECONDS} s: {last_error}")


def poll(check, what: str, deadline_seconds: float = DEADLINE_SECONDS):
    """Calls ``check()`` until it returns something truthy (returned) or the deadline."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"{what}: not within {deadline_seconds} s")


def stop(process: subprocess.Popen, sig: int = signal.SIGINT) -> int:
    """Sends ``sig`` and waits for the exit (killing the group after the deadline)."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=DEADLINE_SECONDS)
            raise AssertionError(
                f"pid {process.pid} ignored {sig!r} for {DEADLINE_SECONDS} s"
            ) from None
    return process.returncode


@contextmanager
def dev_server(
    database: Path | str, port: int, log: Path, settings: str | None = None
) -> Iterator[str]:
    """``manage.py runserver --noreload 127.0.0.1:port`` on ``database`` (with the settings
    module ``settings``, else the project's); yields its base URL once it answers and
    stops it (SIGINT) on exit. Output goes to ``log``."""
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, str(MANAGE), "runserver", "--noreload", f"127.0.0.1:{port}"],
            env=example_environment(database, settings),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_for_page(f"{base}/", process)
            except AssertionError as error:
                raise AssertionError(f"{error}\n{log.read_text()}") from None
            yield base
        finally:
            stop(process)


class Browserless:
    """A cookie-keeping HTTP client for posting the demo page's forms (with CSRF)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.cookies = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def get(self, path: str) -> str:
        with self.opener.open(f"{self.base}{path}", timeout=30) as response:
            return response.read().decode()

    def post_form(self, page: str, action: str) -> str:
        """Loads ``page``, then posts to ``action`` with the page's CSRF token; returns
        the body the redirect leads to."""
        body = self.get(page)
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body)
        if match is None:
            raise AssertionError(f"no CSRF token on {page}")
        request = urllib.request.Request(
            f"{self.base}{action}",
            data=urlencode({"csrfmiddlewaretoken": match.group(1)}).encode(),
            headers={"Referer": f"{self.base}{page}"},
        )
        with self.opener.open(request, timeout=60) as response:
            return response.read().decode()
