"""Compaction and cleanup: they remove what they should and never a record at or above
any group's committed offset."""

from __future__ import annotations

import time

import pytest
from django.db import connections

from later_django.logs import consumer, log, retention_pass
from tests.storage import three_databases

#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

KEYS = ["alpha", "beta", "gamma"]


def offsets(alias: str) -> list[int]:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT record_offset FROM later_log_record ORDER BY record_offset")
        return [offset for (offset,) in cursor.fetchall()]


def fill_single(rounds: int = 10) -> list[tuple[str, int]]:
    """``rounds`` records per key on the one-partition topic, keys interleaved:
    offset ``3 * round + key index``. Returns (key, offset) in append order."""
    placed = log("single").append_many(
        [(key, f"{key}:{n}".encode()) for n in range(rounds) for key in KEYS]
    )
    return [(KEYS[offset % 3], offset) for _, offset in placed]


def commit_group(group: str, next_offset: int) -> None:
    with consumer(group, "single", member_id=f"{group}-member") as member:
        member.commit(0, next_offset)


def test_compaction_keeps_the_newest_per_key_only_below_every_groups_offset(log_db: str) -> None:
    fill_single()  # offsets 0..29; key = KEYS[offset % 3]
    log("single").append(None, b"keyless")  # offset 30
    commit_group("slow", 12)
    commit_group("fast", 25)

    removed = log("single").compact()

    # Below 12 (the lowest group offset) every keyed record has a newer one: all go.
    assert removed == 12
    remaining = offsets(log_db)
    assert remaining == list(range(12, 31)), "nothing at or above offset 12 is touched"
    # The newest per key is still there, and compacting again changes nothing.
    assert log("single").compact() == 0


def test_compaction_never_removes_at_or_above_any_group_offset_across_partitions(
    log_db: str,
) -> None:
    events = log("events")
    placed = events.append_many(
        [(f"key-{k}", f"{k}:{n}".encode()) for n in range(6) for k in range(8)]
    )
    with consumer("slow", "events") as slow:
        for partition in range(4):
            slow.commit(partition, 4)
    with consumer("fast", "events") as fast:
        fast.commit_records(fast.poll(limit=1000))
    before = {(p, r.offset): r for p in range(4) for r in events.read(p, 0, limit=1000)}

    removed = events.compact()

    after = {(p, r.offset): r for p in range(4) for r in events.read(p, 0, limit=1000)}
    assert removed == len(before) - len(after) > 0
    for (partition, offset), record in before.items():
        if offset >= 4:
            assert (partition, offset) in after, "at or above the slow group's offset"
        else:
            newer_same_key = any(
                other.key == record.key and o > offset
                for (p, o), other in before.items()
                if p == partition
            )
            assert ((partition, offset) in after) == (not newer_same_key)
    assert len(placed) == len(before)


def test_compaction_without_any_group_keeps_the_newest_per_key(log_db: str) -> None:
    fill_single(rounds=4)  # offsets 0..11
    assert log("single").compact() == 9
    assert offsets(log_db) == [9, 10, 11]
    assert [r.payload for r in log("single").read(0)] == [b"alpha:3", b"beta:3", b"gamma:3"]


def test_a_group_that_joined_but_never_committed_pins_the_whole_log(log_db: str) -> None:
    fill_single(rounds=4)
    consumer("idle", "single", member_id="idle").join()
    assert log("single").compact() == 0
    assert log("single").cleanup(older_than_seconds=0) == 0
    assert offsets(log_db) == list(range(12))


def test_cleanup_by_age_stops_at_the_lowest_group_offset(log_db: str) -> None:
    fill_single()  # offsets 0..29
    commit_group("slow", 7)
    commit_group("fast", 20)
    time.sleep(0.01)

    assert log("single").cleanup(older_than_seconds=3600) == 0, "nothing that old"
    assert log("single").cleanup(older_than_seconds=0) == 7
    assert offsets(log_db) == list(range(7, 30))
    with consumer("slow", "single", member_id="slow-member") as slow:
        assert [r.offset for r in slow.poll(limit=2)] == [7, 8], "the slow group reads on"


def test_cleanup_by_count_keeps_the_newest_and_honours_the_boundary(log_db: str) -> None:
    fill_single()  # offsets 0..29
    assert log("single").cleanup(keep_last=5) == 25
    assert offsets(log_db) == list(range(25, 30))

    log("single").append_many([("alpha", b"x")] * 10)  # offsets 30..39
    commit_group("reader", 28)
    assert log("single").cleanup(keep_last=2) == 3, "only 25..27 lie below the group's offset"
    assert offsets(log_db) == list(range(28, 40))


def test_dropping_a_group_releases_what_it_held_back(log_db: str) -> None:
    fill_single(rounds=4)
    commit_group("gone", 0)
    assert log("single").compact() == 0
    log("single").drop_group("gone")
    assert log("single").groups() == []
    assert log("single").compact() == 9


def test_cleanup_needs_a_limit(log_db: str) -> None:
    with pytest.raises(ValueError, match=r"cleanup needs older_than_seconds, keep_last or both"):
        log("single").cleanup()
    with pytest.raises(ValueError, match=r"keep_last must be a non-negative int, got -1"):
        log("single").cleanup(keep_last=-1)


def test_the_retention_pass_compacts_and_cleans_within_the_boundary(log_db: str) -> None:
    from later_django.conf import later_settings
    from later_django.maintenance import PassContext

    fill_single()  # offsets 0..29
    commit_group("reader", 20)
    maintenance = retention_pass("single", compact=True, keep_last=15)
    assert maintenance.name == "log_retention.single"
    context = PassContext(
        using=log_db,
        namespace="default",
        settings=later_settings(),
        owner="test",
        deadline=time.monotonic() + 60,
    )

    # Compaction removes the superseded 0..19 (below the group's offset 20);
    # nothing else is both beyond the newest 15 and below 20.
    assert maintenance.run(context) == 20
    assert offsets(log_db) == list(range(20, 30))


def test_a_retention_pass_needs_something_to_do() -> None:
    with pytest.raises(ValueError, match=r"retention_pass needs compact=True"):
        retention_pass("single", compact=False)
