"""Several appenders and consumers at once, each on its own connection (threads)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connections, transaction

from later_django.exceptions import StaleLease
from later_django.logs import consumer, log
from tests.storage import three_databases

#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def run_threads(target: Callable[[int], None], count: int) -> None:
    """Runs ``target(n)`` on ``count`` threads, each closing its connections at the end;
    re-raises the first error."""
    errors: list[BaseException] = []

    def body(n: int) -> None:
        try:
            target(n)
        except BaseException as error:  # re-raised in the test thread
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if errors:
        raise errors[0]


def test_concurrent_appenders_get_distinct_contiguous_offsets(log_db: str) -> None:
    placed: dict[int, list[list[int]]] = {}

    def append(n: int) -> None:
        batches = []
        for round_ in range(15):
            rows = [(f"t{n}", f"{n}:{round_}:{i}".encode()) for i in range(20)]
            batch = log("single").append_many(rows)
            batches.append([offset for _, offset in batch])
        placed[n] = batches

    run_threads(append, 4)

    all_offsets = sorted(offset for batches in placed.values() for b in batches for offset in b)
    assert all_offsets == list(range(4 * 15 * 20))
    for batches in placed.values():
        for batch in batches:
            assert batch == list(range(batch[0], batch[0] + 20)), "a batch is contiguous"
    records = log("single").read(0, 0, limit=5000)
    assert [r.offset for r in records] == all_offsets
    for record in records:
        n, round_, i = map(int, record.payload.split(b":"))
        assert record.offset == placed[n][round_][i]


def test_two_members_polling_at_once_process_every_record(log_db: str) -> None:
    total = 400
    log("events").append_many([(f"key-{n % 40}", f"{n}".encode()) for n in range(total)])
    seen: dict[str, list[bytes]] = {}

    def consume(n: int) -> None:
        member_id = f"member-{n}"
        mine = seen.setdefault(member_id, [])
        with consumer("g", "events", member_id=member_id, lease_seconds=600) as member:
            idle_rounds = 0
            while idle_rounds < 40:
                records = member.poll(limit=25)
                try:
                    member.commit_records(records)
                    mine.extend(r.payload for r in records)
                except StaleLease:
                    continue  # handed over meanwhile: the new holder reads them again
                idle_rounds = 0 if records else idle_rounds + 1
                if not records:
                    member.heartbeat()

    run_threads(consume, 2)

    processed = [payload for payloads in seen.values() for payload in payloads]
    assert sorted(set(processed)) == sorted(f"{n}".encode() for n in range(total))
    with consumer("g", "events", member_id="checker") as checker:
        assert checker.poll(limit=1000) == []


def test_a_later_offset_never_shows_before_an_earlier_one_commits(log_db: str) -> None:
    """The appender holding offset 0 has not committed: a second appender waits for
    it (it cannot take offset 1 and commit first), and readers see neither."""
    single = log("single")
    single.read(0)  # settings and connection ready on this thread
    appended, release = threading.Event(), threading.Event()
    second_done = threading.Event()

    def first(_: int) -> None:
        with transaction.atomic(using=log_db):
            single.append("a", b"first")
            appended.set()
            assert release.wait(60)

    def second(_: int) -> None:
        assert appended.wait(60)
        assert single.append("b", b"second") == (0, 1)
        second_done.set()

    def observe(_: int) -> None:
        assert appended.wait(60)
        time.sleep(0.3)  # the second appender is blocked by now (or not yet started)
        try:
            assert single.read(0) == [], "nothing is visible before the first commits"
            assert not second_done.is_set(), "offset 1 did not commit before offset 0"
        finally:
            release.set()

    run_threads(lambda n: (first, second, observe)[n](n), 3)
    assert [(r.offset, r.payload) for r in single.read(0)] == [(0, b"first"), (1, b"second")]
