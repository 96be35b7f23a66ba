"""The retained-log tests' fixture: ``LATER`` pointed at the case's database with topics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

#: Topics of these tests: ``events`` has 4 partitions, ``single`` one.
TOPICS = {"events": {"partitions": 4}, "single": {"partitions": 1}}


@pytest.fixture
def log_db(db_alias: str) -> Iterator[str]:
    """The alias of this case (SQLite, PostgreSQL or MariaDB), with later_django writing
    to it and the topics ``events`` (4 partitions) and ``single`` (1) configured."""
    with override_settings(LATER={"NAMESPACE": "default", "DATABASE": db_alias, "TOPICS": TOPICS}):
        yield db_alias
