"""Fixtures of the worker-process tests: the database under test and the tasks' line file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.worker.test_worker_process import later_on


@pytest.fixture
def alias(db_alias: str) -> Iterator[str]:
    """The database under test (SQLite, then PostgreSQL), where the test enqueues."""
    with later_on(db_alias):
        yield db_alias


@pytest.fixture
def lines(tmp_path: Path) -> Path:
    """The file the tasks write their lines to."""
    return tmp_path / "lines.jsonl"
