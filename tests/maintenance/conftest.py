"""Fixtures of the maintenance tests: ``LATER`` pointed at the case's database,
runners for a chosen set of passes, and test-only passes that are removed again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from later_django.conf import later_settings
from later_django.engine import metrics
from later_django.maintenance import MaintenancePass, PassRunner, register_pass, unregister_pass

NAMESPACE = "default"


@pytest.fixture
def alias(db_alias: str) -> Iterator[str]:
    """The database under test (SQLite, then PostgreSQL), where ``LATER`` points."""
    metrics.accumulator.take()
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": db_alias}):
        yield db_alias
    metrics.accumulator.take()


@pytest.fixture
def sqlite_db(sqlite_alias: str) -> Iterator[str]:
    with override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": sqlite_alias}):
        yield sqlite_alias


def make_runner(alias: str, *names: str, owner: str = "test-process") -> PassRunner:
    """A runner of the passes ``names`` on ``alias`` under the current settings."""
    return PassRunner(
        using=alias,
        namespace=NAMESPACE,
        settings=later_settings(),
        owner=owner,
        names=list(names),
    )


@pytest.fixture
def temporary_passes() -> Iterator[Callable[..., MaintenancePass]]:
    """Registers test-only passes (``register(name, interval, run, **options)``) and
    removes them after the test."""
    names: list[str] = []

    def register(name: str, interval: float, run: Callable[..., int], **options: Any):
        names.append(name)
        return register_pass(MaintenancePass(name, interval, run, **options))

    yield register
    for name in names:
        unregister_pass(name)


def fetch(alias: str, sql: str, params: list[Any] | None = None) -> list[tuple]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params or [])
        return list(cursor.fetchall())


def execute(alias: str, sql: str, params: list[Any] | None = None) -> None:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params or [])
