"""Fixtures of the delivery-queue tests: a namespace of the test's own (rows left by
another test never show up in its assertions) and the queue store of ``db_alias``."""

from __future__ import annotations

import uuid

import pytest

from later_django.storage.queue import SqlDeliveryQueue
from later_django.storage.stores import stores_for


@pytest.fixture
def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def queue(db_alias: str) -> SqlDeliveryQueue:
    return stores_for(db_alias).queue
