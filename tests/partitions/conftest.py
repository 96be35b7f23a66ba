"""Fixtures of the partition tests: ``LATER`` with a topic, on each database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from later_django.engine import metrics

NAMESPACE = "default"
TOPIC = "orders"
PARTITIONS = 8
TOPICS = {TOPIC: {"partitions": PARTITIONS}}


@pytest.fixture
def part_db(db_alias: str) -> Iterator[str]:
    """The alias of this case with ``LATER["TOPICS"]`` = ``orders`` (8 partitions)."""
    metrics.accumulator.take()
    later = {"NAMESPACE": NAMESPACE, "DATABASE": db_alias, "TOPICS": TOPICS}
    with override_settings(LATER=later):
        yield db_alias
    metrics.accumulator.take()
