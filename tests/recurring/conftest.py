"""Fixtures of the recurring tests: ``LATER["DATABASE"]`` pointed at the case's database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from later_django.engine import metrics


@pytest.fixture
def recur_db(db_alias: str) -> Iterator[str]:
    """The alias of this case (SQLite or PostgreSQL), with the engine writing to it."""
    metrics.accumulator.take()
    with override_settings(LATER={"NAMESPACE": "default", "DATABASE": db_alias}):
        yield db_alias
        metrics.flush()
    metrics.accumulator.take()
