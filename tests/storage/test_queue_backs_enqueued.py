"""The ``enqueued`` stage is answered by the delivery queue (seed test ported)."""

from __future__ import annotations

import msgpack
import pytest
from django.db import connections

from later_django.admin.job_lists import list_by_stage
from later_django.core.commands import ExecuteJob, encode_command
from later_django.storage.stores import Stores, stores_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: A queue message that is not a job: a command tag this release does not know.
OTHER_COMMAND = msgpack.packb({"c": "partition", "topic": "orders"})

NAMESPACE = "ns"
QUEUE = "jobs"


def enqueued_count(storage: Stores) -> int:
    return storage.index.job_index_stage_counts(NAMESPACE).get("enqueued", 0)


def leased_rows(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_delivery_queue WHERE lease_until IS NOT NULL")
        return cursor.fetchone()[0]


def test_queued_jobs_are_counted_and_listed_from_the_delivery_queue(db_alias: str) -> None:
    storage = stores_for(db_alias)
    queue = stores_for(db_alias).queue
    for number in range(30):
        queue.publish(NAMESPACE, QUEUE, [encode_command(ExecuteJob(f"job-{number:02}", "work"))])
    # A queue message that is not a job is not listed as one.
    queue.publish(NAMESPACE, QUEUE, [OTHER_COMMAND])
    assert enqueued_count(storage) == 31, "publish adds to the counter"

    # Claimed rows leave the count; an ack removes a claimed row without touching
    # it; handing one back puts it in again.
    claimed = queue.claim(NAMESPACE, [QUEUE], "consumer", lease_ms=60_000, batch_size=1)
    assert len(claimed) == 1
    assert enqueued_count(storage) == 31 - leased_rows(db_alias) == 30
    assert queue.nack("consumer", [claimed[0].sequence]) == 1
    assert enqueued_count(storage) == 31 - leased_rows(db_alias) == 31
    claimed = queue.claim(NAMESPACE, [QUEUE], "consumer", lease_ms=60_000, batch_size=16)
    assert len(claimed) == 16
    assert enqueued_count(storage) == 15
    assert queue.ack("consumer", [message.sequence for message in claimed[:4]]) == 4
    assert enqueued_count(storage) == 15, "acking a claimed row changes nothing"

    # Drift, then a recount from the queue itself.
    with connections[db_alias].cursor() as cursor:
        cursor.execute("UPDATE later_delivery_queue SET lease_owner = NULL, lease_until = NULL")
        cursor.execute("DELETE FROM later_queue_depth")
    assert enqueued_count(storage) == 0
    storage.index.job_index_reconcile_stage_counts(NAMESPACE)
    assert enqueued_count(storage) == 27

    # The listing: newest first, in pages, jobs only; the cursor is the queue sequence.
    page = list_by_stage(storage.index, NAMESPACE, "enqueued", None, 10)
    assert [row.job_id for row in page.items] == [
        "job-29", "job-28", "job-27", "job-26", "job-25", "job-24", "job-23", "job-22", "job-21",
    ], "the message that is not a job (newest) is skipped, jobs are newest first"  # fmt: skip
    assert page.next_cursor is not None
    second = list_by_stage(storage.index, NAMESPACE, "enqueued", page.next_cursor, 10)
    assert second.items[0].job_id == "job-20"
    assert all(row.stage == "enqueued" and row.payload_type == "work" for row in page.items)
    # The four acked messages (the oldest: job-00..job-03) are gone from the listing.
    listed, cursor = [], None
    while True:
        chunk = list_by_stage(storage.index, NAMESPACE, "enqueued", cursor, 10)
        listed += [row.job_id for row in chunk.items]
        if chunk.next_cursor is None:
            break
        cursor = chunk.next_cursor
    assert listed == [f"job-{number:02}" for number in range(29, 3, -1)]
