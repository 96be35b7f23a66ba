"""Conformance of ``JobIndexPort`` (``stores_for(alias).index``) on SQLite, PostgreSQL and
MariaDB: ``queue_sample_counts`` and ``queued_messages``, as their docstrings state."""

from __future__ import annotations

import pytest
from django.db import connections

from later_django.core.clock import now_ms
from later_django.storage.job_index import QueuedMessage
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexRow
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

NS = "ns"
OTHER_NS = "ns-other"
#: A third queue: every queue of the namespace counts, whatever its name.
THIRD = "reports"


def index_row(
    job_id: str, stage: str, *, revision: int = 0, topic: str | None = "t"
) -> JobIndexRow:
    now = now_ms()
    return JobIndexRow(
        job_id=job_id,
        payload_type="t",
        stage=stage,
        stage_date_ms=now,
        revision=revision,
        created_at_ms=now,
        topic=topic,
        partition_id=0 if topic else None,
        sequence=int(job_id[-1]) if topic else None,
    )


def run_sql(db_alias: str, sql: str, params: list) -> None:
    with connections[db_alias].cursor() as cursor:
        cursor.execute(sql, params)


# --- queue_sample_counts ---


def test_queue_sample_counts_of_an_empty_namespace_are_zero(db_alias: str) -> None:
    assert stores_for(db_alias).metrics.queue_sample_counts(NS) == (0, 0)


def test_queue_sample_counts_read_ready_job_queue_depth_and_enqueued_counter(
    db_alias: str,
) -> None:
    stores = stores_for(db_alias)
    stores.queue.publish(NS, "default", [b"a", b"b", b"c"])
    stores.queue.publish(NS, "mail", [b"d"])
    stores.queue.publish(NS, THIRD, [b"report-1", b"report-2"])
    stores.queue.publish(OTHER_NS, "default", [b"elsewhere"])
    # A claimed message is not ready.
    assert len(stores.queue.claim(NS, ["default"], "w", 60_000, batch_size=1)) == 1
    stores.index.job_index_upsert(
        NS,
        [
            index_row("p1", "enqueued"),
            index_row("p2", "enqueued"),
            index_row("p3", "running"),
            index_row("p4", "delayed"),
        ],
    )
    stores.index.job_index_upsert(OTHER_NS, [index_row("p5", "enqueued")])
    assert stores.metrics.queue_sample_counts(NS) == (5, 2)
    assert stores.metrics.queue_sample_counts(OTHER_NS) == (1, 1)
    # A job leaving ``enqueued`` leaves the partitioned count.
    stores.index.job_index_upsert(NS, [index_row("p1", "running", revision=1)])
    assert stores.metrics.queue_sample_counts(NS) == (5, 1)


def test_queue_sample_counts_read_a_counter_below_zero_as_zero(db_alias: str) -> None:
    # Counter shards as a reordered update can leave them for a moment.
    run_sql(
        db_alias,
        "INSERT INTO later_queue_depth (namespace, queue_name, shard, ready) "
        "VALUES (%s, %s, %s, %s)",
        [NS, "default", 99, -4],
    )
    run_sql(
        db_alias,
        "INSERT INTO later_stage_counts (namespace, stage, shard, count) VALUES (%s, %s, %s, %s)",
        [NS, "enqueued", 99, -2],
    )
    assert stores_for(db_alias).metrics.queue_sample_counts(NS) == (0, 0)
    stores_for(db_alias).queue.publish(NS, "default", [b"x"] * 6)
    assert stores_for(db_alias).metrics.queue_sample_counts(NS) == (2, 0)


# --- queued_messages ---


def test_queued_messages_are_the_unclaimed_job_queue_messages_newest_first(
    db_alias: str,
) -> None:
    stores = stores_for(db_alias)
    base = now_ms() - 10_000
    claimed, s1 = stores.queue.publish(NS, "default", [b"claimed", b"one"], available_at_ms=base)
    (s2,) = stores.queue.publish(NS, "mail", [b"two"], available_at_ms=base + 1)
    (s4,) = stores.queue.publish(NS, THIRD, [b"report"], available_at_ms=base + 2)
    (s3,) = stores.queue.publish(NS, "default", [b"three"], available_at_ms=base + 60_000)
    stores.queue.publish(OTHER_NS, "default", [b"elsewhere"], available_at_ms=base)
    (taken,) = stores.queue.claim(NS, ["default"], "w", 60_000, batch_size=1)
    assert taken.sequence == claimed
    assert stores.index.queued_messages(NS, None, 10) == [
        QueuedMessage(s3, b"three", base + 60_000),
        QueuedMessage(s4, b"report", base + 2),
        QueuedMessage(s2, b"two", base + 1),
        QueuedMessage(s1, b"one", base),
    ]


def test_queued_messages_are_bounded_by_limit_and_before_sequence(db_alias: str) -> None:
    stores = stores_for(db_alias)
    at = now_ms()
    sequences = stores.queue.publish(
        NS, "default", [b"m0", b"m1", b"m2", b"m3"], available_at_ms=at
    )
    index = stores.index
    assert [m.sequence for m in index.queued_messages(NS, None, 2)] == sequences[:1:-1]
    assert [m.payload for m in index.queued_messages(NS, sequences[3], 2)] == [b"m2", b"m1"]
    assert [m.payload for m in index.queued_messages(NS, sequences[1], 10)] == [b"m0"]
    assert index.queued_messages(NS, sequences[0], 10) == []
    assert index.queued_messages(OTHER_NS, None, 10) == []


def test_queued_messages_include_a_message_handed_back(db_alias: str) -> None:
    stores = stores_for(db_alias)
    (sequence,) = stores.queue.publish(NS, "default", [b"payload"])
    stores.queue.claim(NS, ["default"], "w", 60_000)
    assert stores.index.queued_messages(NS, None, 10) == []
    before = now_ms()
    stores.queue.nack("w", [sequence], delay_ms=5_000)
    (message,) = stores.index.queued_messages(NS, None, 10)
    assert (message.sequence, message.payload) == (sequence, b"payload")
    assert before + 5_000 <= message.available_at_ms <= now_ms() + 5_000
