"""Consumer groups: partitions shared by rendezvous, fenced commits, takeover, leave."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from django.db import connections

from later_django.exceptions import StaleLease
from later_django.logs import Consumer, consumer, log
from tests.storage import three_databases

#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

ALL = [0, 1, 2, 3]


def wait_for(condition: Callable[[], bool], timeout: float = 30.0, step: float = 0.05) -> None:
    """Polls ``condition`` until true; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(step)


def settle(*members: Consumer) -> None:
    """Heartbeats every member until the group's partitions are split among them
    (disjoint, covering all) and stable over a round."""

    def split() -> bool:
        for member in members:
            member.heartbeat()
        held = [set(member.assignment()) for member in members]
        return sum(map(len, held)) == 4 and set().union(*held) == set(ALL)

    wait_for(split)


def lease_rows(alias: str) -> dict[int, tuple[str | None, int]]:
    """Partition → (owner, epoch) of group ``g``'s lease rows, read with plain SQL."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT partition_id, owner, epoch FROM later_log_consumer_lease "
            "WHERE group_name = 'g' ORDER BY partition_id"
        )
        rows = {p: (owner, epoch) for p, owner, epoch in cursor.fetchall()}
    api_view = {p: (owner, epoch) for p, owner, _, epoch in log("events").group_leases("g")}
    assert api_view == rows, "group_leases() reports the same rows"
    return rows


def fill(per_key: int = 5, keys: int = 12) -> dict[int, int]:
    """Appends ``per_key`` records for each of ``keys`` keys; returns partition → count."""
    events = log("events")
    placed = events.append_many(
        [(f"key-{k}", f"{k}:{n}".encode()) for n in range(per_key) for k in range(keys)]
    )
    counts: dict[int, int] = {}
    for partition, _ in placed:
        counts[partition] = counts.get(partition, 0) + 1
    return counts


def test_a_single_member_gets_every_partition_and_reads_from_the_committed_offset(
    log_db: str,
) -> None:
    counts = fill()
    with consumer("g", "events", member_id="a") as member:
        assert member.assignment() == ALL
        first = member.poll(limit=1000)
        assert len(first) == sum(counts.values())
        again = member.poll(limit=1000)
        assert sorted((r.partition, r.offset) for r in again) == sorted(
            (r.partition, r.offset) for r in first
        ), "uncommitted records come back"
        committed = member.commit_records(first)
        assert committed == {p: counts[p] for p in counts}
        assert member.committed() == {p: counts.get(p, 0) for p in ALL}
        assert member.poll(limit=1000) == []
        log("events").append("key-1", b"late")
        (late,) = member.poll(limit=1000)
        assert late.payload == b"late"


def test_poll_respects_its_limit_and_commit_resumes_from_the_middle(log_db: str) -> None:
    log("single").append_many([(None, f"{n}".encode()) for n in range(10)])
    with consumer("g", "single", member_id="a") as member:
        batch = member.poll(limit=4)
        assert [r.offset for r in batch] == [0, 1, 2, 3]
        member.commit(0, 3)
        assert [r.offset for r in member.poll(limit=4)] == [3, 4, 5, 6]


def test_two_members_split_the_partitions_disjointly_and_cover_all(log_db: str) -> None:
    counts = fill()
    first = consumer("g", "events", member_id="member-a").join()
    second = consumer("g", "events", member_id="member-b").join()
    settle(first, second)

    a, b = set(first.assignment()), set(second.assignment())
    assert a.isdisjoint(b) and a | b == set(ALL)
    assert a and b, "rendezvous gives each of these two members some of 4 partitions"
    seen_a, seen_b = first.poll(limit=1000), second.poll(limit=1000)
    assert {r.partition for r in seen_a} <= a and {r.partition for r in seen_b} <= b
    assert len(seen_a) + len(seen_b) == sum(counts.values())
    rows = lease_rows(log_db)
    assert {p for p, (owner, _) in rows.items() if owner == "member-a"} == a
    assert {p for p, (owner, _) in rows.items() if owner == "member-b"} == b
    first.leave()
    second.leave()


def test_a_commit_with_a_stale_epoch_is_refused_and_the_offset_is_unchanged(log_db: str) -> None:
    log("single").append_many([(None, f"{n}".encode()) for n in range(5)])
    old = consumer("g", "single", member_id="old", lease_seconds=1).join()
    assert old.assignment() == [0]
    old.commit(0, 2)
    old_epoch = old.epoch(0)
    new = consumer("g", "single", member_id="new", lease_seconds=1).join()

    # "old" goes silent; once its lease lapses "new" takes the partition over.
    wait_for(lambda: new.heartbeat() == [0], timeout=30)
    assert new.epoch(0) == old_epoch + 1
    with pytest.raises(StaleLease, match=r"member 'old' of group 'g' lost partition 0"):
        old.commit(0, 5)
    assert new.committed() == {0: 2}
    assert old.assignment() == []
    with pytest.raises(StaleLease, match=r"does not hold partition 0"):
        old.commit(0, 5)
    assert [r.offset for r in new.poll()] == [2, 3, 4]
    new.commit(0, 5)
    assert new.committed() == {0: 5}


def test_commit_records_with_one_stale_partition_changes_no_offset(log_db: str) -> None:
    fill()
    member = consumer("g", "events", member_id="a", lease_seconds=1).join()
    records = member.poll(limit=1000)
    assert {r.partition for r in records} == set(ALL)
    taker = consumer("g", "events", member_id="b", lease_seconds=1).join()
    wait_for(lambda: len(taker.heartbeat()) == 4, timeout=30)

    with pytest.raises(StaleLease):
        member.commit_records(records)
    assert taker.committed() == {p: 0 for p in ALL}


def test_a_silent_member_is_replaced_after_its_lease_lapses(log_db: str) -> None:
    fill()
    silent = consumer("g", "events", member_id="silent", lease_seconds=1).join()
    live = consumer("g", "events", member_id="live", lease_seconds=1).join()
    settle(silent, live)
    lost = set(silent.assignment())
    epochs_before = {p: epoch for p, (_, epoch) in lease_rows(log_db).items()}

    # "silent" stops beating; "live" keeps polling and takes everything over.
    wait_for(lambda: (live.poll(limit=1), live.assignment() == ALL)[1], timeout=30)
    rows = lease_rows(log_db)
    assert all(owner == "live" for owner, _ in rows.values())
    for partition in lost:
        assert rows[partition][1] == epochs_before[partition] + 1, "takeover raises the epoch"
    records = live.poll(limit=1000)
    assert lost <= {r.partition for r in records}


def test_leave_releases_the_partitions_at_once(log_db: str) -> None:
    fill()
    # A long lease: only the release can hand the partitions over within the test.
    leaving = consumer("g", "events", member_id="leaving", lease_seconds=600).join()
    staying = consumer("g", "events", member_id="staying", lease_seconds=600).join()
    settle(leaving, staying)
    released = set(leaving.assignment())

    leaving.leave()
    assert leaving.assignment() == []
    rows = lease_rows(log_db)
    assert all(rows[p][0] is None for p in released)
    assert staying.heartbeat() == ALL
    assert {p for p, (owner, _) in lease_rows(log_db).items() if owner == "staying"} == set(ALL)


def test_a_member_that_joins_later_gets_its_partitions_handed_over(log_db: str) -> None:
    fill()
    first = consumer("g", "events", member_id="member-a", lease_seconds=600).join()
    assert first.assignment() == ALL
    second = consumer("g", "events", member_id="member-b", lease_seconds=600).join()
    assert second.assignment() == [], "partitions under a live lease wait for the hand-over"
    settle(first, second)
    assert second.assignment() and len(first.assignment()) < 4


def test_groups_are_independent(log_db: str) -> None:
    counts = fill()
    total = sum(counts.values())
    with consumer("g1", "events") as one, consumer("g2", "events") as two:
        records = one.poll(limit=1000)
        one.commit_records(records)
        assert len(two.poll(limit=1000)) == total
        assert one.poll(limit=1000) == []
    assert log("events").groups() == ["g1", "g2"]


def test_consumer_arguments_are_checked(log_db: str) -> None:
    with pytest.raises(ValueError, match=r"lease_seconds must be a number"):
        Consumer("g", "events", lease_seconds=0)
    with pytest.raises(ValueError, match=r"group must be a non-empty str"):
        Consumer("", "events")
    with consumer("g", "events", member_id="a") as member:
        with pytest.raises(ValueError, match=r"next_offset must be a non-negative int"):
            member.commit(0, -1)
        with pytest.raises(ValueError, match=r"partition 9 is out of range"):
            member.commit(9, 0)
