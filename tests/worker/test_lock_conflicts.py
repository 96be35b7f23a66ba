"""A worker's turn that loses a lock conflict runs again at once, a bounded number of
times, counted by kind (``worker.conflicts``); the drivers tell a conflict by the
errors real servers raise: a deadlock two sessions make, a lock wait that times out."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import DatabaseError, IntegrityError, connections

from later_django.storage.stores import driver_for
from later_django.worker.conflicts import RETRIES, LockConflicts
from later_django.worker.telemetry import Telemetry
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
db_alias = three_databases.db_alias
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True


class CountingTelemetry(Telemetry):
    def __init__(self) -> None:
        self.conflicts: list[str] = []

    def lock_conflict(self, kind: str) -> None:
        self.conflicts.append(kind)


@pytest.fixture
def probe_table(db_alias: str) -> Iterator[Callable[[], Any]]:
    """A two-row table, and a maker of new connections (Django-wrapped cursors) to it."""
    connection = connections[db_alias]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE conflict_probe (id INTEGER PRIMARY KEY, v INTEGER)")
        cursor.execute("INSERT INTO conflict_probe (id, v) VALUES (1, 0), (2, 0)")
    opened: list[Any] = []

    def new_session() -> Any:
        other = connection.copy()
        other.ensure_connection()
        other.set_autocommit(False)
        opened.append(other)
        return other

    try:
        yield new_session
    finally:
        for other in opened:
            other.rollback()
            other.close()
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE conflict_probe")


def _update(session: Any, row: int) -> None:
    with session.cursor() as cursor:
        cursor.execute("UPDATE conflict_probe SET v = v + 1 WHERE id = %s", [row])


def _lock_wait_error(alias: str, new_session: Callable[[], Any]) -> DatabaseError:
    holder, waiter = new_session(), new_session()
    _update(holder, 1)
    with waiter.cursor() as cursor:
        if waiter.vendor == "mysql":
            cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
        else:
            cursor.execute("SET lock_timeout = '200ms'")
    with pytest.raises(DatabaseError) as raised:
        _update(waiter, 1)
    holder.rollback()
    waiter.rollback()
    return raised.value


def _deadlock_error(alias: str, new_session: Callable[[], Any]) -> DatabaseError:
    first, second = new_session(), new_session()
    _update(first, 1)
    _update(second, 2)
    errors: list[BaseException] = []

    def cross(session: Any, row: int) -> None:
        try:
            _update(session, row)
        except DatabaseError as error:
            errors.append(error)
            session.rollback()  # lets the other one through

    threads = [
        threading.Thread(target=cross, args=(first, 2)),
        threading.Thread(target=cross, args=(second, 1)),
    ]
    for session in (first, second):
        session.inc_thread_sharing()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    first.rollback()
    second.rollback()
    assert len(errors) == 1, errors  # the server broke the deadlock by failing one
    assert isinstance(errors[0], DatabaseError)
    return errors[0]


def test_a_lost_lock_wait_and_a_deadlock_are_conflicts(
    db_alias: str, vendor: str, probe_table
) -> None:
    driver = driver_for(db_alias)
    if vendor == "sqlite":
        pytest.skip("SQLite has no row locks: a writer waits for the file's lock (busy timeout)")

    assert driver.lock_conflict(_lock_wait_error(db_alias, probe_table)) == "lock_wait"
    assert driver.lock_conflict(_deadlock_error(db_alias, probe_table)) == "deadlock"


def test_other_errors_are_not_conflicts(db_alias: str, probe_table) -> None:
    driver = driver_for(db_alias)
    with pytest.raises(IntegrityError) as raised, connections[db_alias].cursor() as cursor:
        cursor.execute("INSERT INTO conflict_probe (id, v) VALUES (1, 0)")

    assert driver.lock_conflict(raised.value) is None
    assert driver.lock_conflict(ValueError("not a database error")) is None


def test_conflicts_in_a_row_run_again_up_to_the_bound(
    db_alias: str, vendor: str, probe_table
) -> None:
    if vendor == "sqlite":
        pytest.skip("SQLite has no row locks: a writer waits for the file's lock (busy timeout)")
    telemetry = CountingTelemetry()
    conflicts = LockConflicts(driver_for(db_alias), telemetry)
    error = _lock_wait_error(db_alias, probe_table)

    assert [conflicts.absorb(error) for _ in range(RETRIES + 1)] == [True] * RETRIES + [False]
    assert telemetry.conflicts == ["lock_wait"] * RETRIES

    conflicts.reset()  # a turn went through: the next conflict runs again
    assert conflicts.absorb(error) is True
    with pytest.raises(IntegrityError) as raised, connections[db_alias].cursor() as cursor:
        cursor.execute("INSERT INTO conflict_probe (id, v) VALUES (2, 0)")
    assert conflicts.absorb(raised.value) is False
