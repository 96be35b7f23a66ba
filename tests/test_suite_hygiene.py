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
