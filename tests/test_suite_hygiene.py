"""A process that loads the test settings leaves no temporary directory behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_process_with_the_test_settings_removes_its_temporary_directory() -> None:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("LATER_TEST_SQLITE_DIR", None)
    code = "import tests.settings as s; print(s.SQLITE_DIRECTORY, flush=True)"
    printed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd=ROOT,
    ).stdout.strip()
    directory = Path(printed)
    assert directory.name.startswith("later-")
    assert not directory.exists()


def test_every_file_of_the_lanes_exists_once_and_the_corners_are_slow_files() -> None:
    """tests/lanes.py names files by path: a renamed or deleted file must not fall out
    of the slow lane (or the corners) unnoticed."""
    from tests import lanes

    assert [name for name in lanes.SLOW if not (ROOT / name).is_file()] == []
    assert len(set(lanes.SLOW)) == len(lanes.SLOW)
    assert set(lanes.SLOW) >= lanes.CORNERS


def test_the_slow_files_are_collected_first_and_marked() -> None:
    """The collection a worker hands to xdist starts with the slow files in the lanes'
    order; the quick files follow; every test of a slow file carries ``slow``."""
    from tests import lanes

    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = []
    for line in listing.splitlines():
        name = line.split("::")[0]
        if "::" in line and (not files or files[-1] != name):
            files.append(name)
    assert len(files) == len(set(files)), "a file's tests are not contiguous"
    assert files[: len(lanes.SLOW)] == list(lanes.SLOW)
    slow = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert {line.split("::")[0] for line in slow.splitlines() if "::" in line} == set(lanes.SLOW)
