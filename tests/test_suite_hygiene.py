"""A process that loads the test settings leaves no temporary directory behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_slow_files_are_collected_first_and_marked(request: pytest.FixtureRequest) -> None:
    """The collection this run hands to its workers (the session's items, in the
    order every xdist worker collected them) starts with the slow files in the lanes'
    order, then the quick ones; each file's tests are contiguous, and every test of a
    slow file carries ``slow``."""
    from tests import lanes

    items = request.session.items
    files: list[str] = []
    for item in items:
        name = lanes.file_of(item)
        if not files or files[-1] != name:
            files.append(name)
    assert len(files) == len(set(files)), "a file's tests are not contiguous"
    slow_collected = [name for name in lanes.SLOW if name in files]
    assert files[: len(slow_collected)] == slow_collected
    for item in items:
        assert (item.get_closest_marker("slow") is not None) == (
            lanes.file_of(item) in lanes.SLOW
        ), item.nodeid


class _Item:
    """What the lanes' hook reads of a test item: its path, and the marks it is given."""

    def __init__(self, path: Path, test: int) -> None:
        self.path, self.test, self.marks = path, test, set()

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.add(mark.name)


def test_the_lanes_order_puts_the_slow_files_first_and_keeps_each_files_order() -> None:
    """The hook on every test file of the suite, two tests each, handed over in
    reverse: the slow files come first in ``SLOW``'s order, marked; each file's
    tests keep their order; the corners are marked ``corners`` too."""
    from tests import lanes

    paths = sorted((ROOT / "tests").rglob("test_*.py"), reverse=True)
    items = [_Item(path, test) for path in paths for test in (0, 1)]
    lanes.pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    order = [lanes.file_of(item) for item in items[::2]]
    assert order[: len(lanes.SLOW)] == list(lanes.SLOW)
    assert [item.test for item in items] == [0, 1] * len(paths)
    for item in items:
        name = lanes.file_of(item)
        assert ("slow" in item.marks) == (name in lanes.SLOW), name
        assert ("corners" in item.marks) == (name in lanes.CORNERS), name
