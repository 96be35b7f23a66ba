"""``later_maintenance`` and ``later_worker`` as real processes on the test databases.

Processes run ``python -m django`` with :mod:`tests.maintenance.maintenance_settings`
pointed at the SQLite file or PostgreSQL test database of the case. Every wait
has a deadline; the ``processes`` fixture kills whatever a test leaves running.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.maintenance.conftest import NAMESPACE, fetch

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

REPOSITORY = Path(__file__).resolve().parents[2]
#: Read by :mod:`tests.maintenance.probe_pass` in the subprocesses. Not imported from
#: there: importing it would register its pass in this process for the whole session.
PROBE_FILE_ENV = "LATER_MAINTENANCE_PROBE_FILE"
DEADLINE_SECONDS = 60.0


def database_settings(alias: str) -> dict[str, Any]:
    source = settings.DATABASES[alias]
    keys = ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS")
    return {key: source[key] for key in keys if key in source}


class Processes:
    """Starts ``manage.py`` command subprocesses on a test database; kills leftovers."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []
        self.probe_file = directory / "probe.jsonl"

    def start(self, alias: str, *command: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.maintenance.maintenance_settings",
            "PYTHONPATH": str(REPOSITORY),
            "PYTHONUNBUFFERED": "1",
            "LATER_WORKER_DATABASE": json.dumps(database_settings(alias)),
            "LATER_TEST_SQLITE_DIR": str(settings.SQLITE_DIRECTORY),
            PROBE_FILE_ENV: str(self.probe_file),
        }
        log_path = self.directory / f"process-{len(self.started)}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "django", *command],
                env=env,
                cwd=REPOSITORY,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append((process, log_path))
        return process

    def logs(self) -> str:
        return "\n".join(
            f"--- {' '.join(map(str, process.args))} (pid {process.pid}) ---\n"
            + path.read_text(errors="replace")
            for process, path in self.started
        )

    def probe_runs(self) -> list[dict[str, float]]:
        if not self.probe_file.exists():
            return []
        return [json.loads(line) for line in self.probe_file.read_text().splitlines() if line]

    def wait_exit(self, process: subprocess.Popen[bytes], timeout: float) -> int:
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"process {process.pid} still running after {timeout} s\n{self.logs()}")

    def kill_all(self) -> None:
        for process, _ in self.started:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    pool = Processes(tmp_path)
    try:
        yield pool
    finally:
        pool.kill_all()


def wait_for(condition, what: str, processes: Processes):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {DEADLINE_SECONDS} s\n{processes.logs()}")
        time.sleep(0.1)


def test_two_maintenance_processes_never_run_one_pass_at_the_same_time(
    db_alias: str, processes: Processes
) -> None:
    first = processes.start(db_alias, "later_maintenance", "--pass", "overlap_probe")
    second = processes.start(db_alias, "later_maintenance", "--pass", "overlap_probe")

    def enough_runs_by_both() -> bool:
        runs = processes.probe_runs()
        return len(runs) >= 10 and {run["pid"] for run in runs} == {first.pid, second.pid}

    wait_for(enough_runs_by_both, "ten probe runs, by both processes", processes)
    for process in (first, second):
        process.send_signal(signal.SIGTERM)
    assert processes.wait_exit(first, 30) == 0, processes.logs()
    assert processes.wait_exit(second, 30) == 0, processes.logs()
    runs = sorted(processes.probe_runs(), key=lambda run: run["start"])
    overlaps = [
        (earlier, later)
        for earlier, later in itertools.pairwise(runs)
        if later["start"] < earlier["end"]
    ]
    assert overlaps == [], processes.logs()


def test_maintenance_once_runs_the_due_passes_and_exits_0(
    db_alias: str, processes: Processes
) -> None:
    process = processes.start(db_alias, "later_maintenance", "--once")
    assert processes.wait_exit(process, DEADLINE_SECONDS) == 0, processes.logs()
    output = processes.logs()
    for name in ("sweep", "reconcile", "queue_sample", "purge", "overlap_probe"):
        assert f"{name}: " in output, output
    samples = fetch(
        db_alias, "SELECT COUNT(*) FROM later_queue_samples WHERE namespace = %s", [NAMESPACE]
    )
    assert samples == [(1,)]
    assert len(processes.probe_runs()) == 1


def test_maintenance_refuses_an_unknown_pass(db_alias: str, processes: Processes) -> None:
    process = processes.start(db_alias, "later_maintenance", "--once", "--pass", "nope")
    assert processes.wait_exit(process, DEADLINE_SECONDS) != 0
    assert "--pass nope: not a registered maintenance pass" in processes.logs()


def test_a_worker_runs_the_maintenance_passes(db_alias: str, processes: Processes) -> None:
    worker = processes.start(db_alias, "later_worker", "--concurrency", "1")

    def sampled_and_probed() -> bool:
        samples = fetch(db_alias, "SELECT COUNT(*) FROM later_queue_samples")
        return samples[0][0] >= 1 and len(processes.probe_runs()) >= 1

    wait_for(sampled_and_probed, "a queue sample and a probe run by the worker", processes)
    worker.send_signal(signal.SIGTERM)
    assert processes.wait_exit(worker, 30) == 0, processes.logs()
    assert {run["pid"] for run in processes.probe_runs()} == {worker.pid}
