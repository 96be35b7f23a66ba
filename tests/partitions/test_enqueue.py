"""Enqueue to a partition: sequence, partition row, head, index row, validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction
from django.test import override_settings

from later_django.api import (
    TopicLayoutMismatch,
    TopicNotConfigured,
    continue_with,
    enqueue_to_partition,
)
from later_django.core.topics import partition_for_key
from later_django.engine.topics import register_topic
from later_django.storage.stores import stores_for
from tests.partitions import tasks
from tests.partitions.conftest import NAMESPACE, PARTITIONS, TOPIC
from tests.partitions.support import (
    PARTITION_TABLES,
    fetch,
    heads,
    index_row,
    partition_rows,
    record_of,
)
from tests.storage.three_databases import key_column

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def _counts(alias: str) -> dict[str, int]:
    tables = (*PARTITION_TABLES, "later_storage", "later_jobs_index", "later_delivery_queue")
    return {table: fetch(alias, f"SELECT COUNT(*) FROM {table}")[0][0] for table in tables}


def test_jobs_of_one_key_get_consecutive_sequences_and_one_head(
    part_db: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines")
    first = enqueue_to_partition(TOPIC, "customer-7", tasks.record_key, path, "customer-7", 0)
    second = enqueue_to_partition(TOPIC, "customer-7", tasks.record_key, path, "customer-7", 1)
    partition = partition_for_key("customer-7", PARTITIONS)

    one, two = record_of(part_db, first.id), record_of(part_db, second.id)
    assert (one.topic, one.partition_id, one.sequence) == (TOPIC, partition, 1)
    assert (two.topic, two.partition_id, two.sequence) == (TOPIC, partition, 2)
    assert one.stage == two.stage == "enqueued"
    assert partition_rows(part_db) == [
        (TOPIC, partition, 1, first.id),
        (TOPIC, partition, 2, second.id),
    ]
    [head] = heads(part_db)
    assert head[:4] == (TOPIC, partition, 1, first.id)
    assert head[5] == "enqueued"
    # Partitioned jobs never enter the delivery queue.
    assert fetch(part_db, "SELECT COUNT(*) FROM later_delivery_queue")[0][0] == 0


def test_partitioned_jobs_appear_in_the_index_with_topic_partition_and_sequence(
    part_db: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines")
    result = enqueue_to_partition(TOPIC, 42, tasks.record_key, path, "42", 0)
    assert index_row(part_db, result.id) == (
        "enqueued",
        TOPIC,
        partition_for_key(42, PARTITIONS),
        1,
        None,
    )


def test_a_delayed_job_makes_a_delayed_head(part_db: str, tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    path = str(tmp_path / "lines")
    later = datetime.now(UTC) + timedelta(hours=1)
    result = enqueue_to_partition(TOPIC, "k", tasks.record_key.using(run_after=later), path, "k", 0)
    [head] = heads(part_db)
    assert head[3] == result.id
    assert head[5] == "delayed"
    assert head[4] == int(later.timestamp() * 1000)
    assert index_row(part_db, result.id)[0] == "delayed"
    # No schedule key: the head carries the time.
    key = key_column(part_db)
    assert fetch(
        part_db, f"SELECT COUNT(*) FROM later_storage WHERE {key} LIKE %s", ["%-due-%"]
    ) == [(0,)]


def test_an_unconfigured_topic_is_refused_and_nothing_is_written(
    part_db: str, tmp_path: Path
) -> None:
    before = _counts(part_db)
    with pytest.raises(TopicNotConfigured, match="'invoices' is not configured"):
        enqueue_to_partition("invoices", "k", tasks.record_key, str(tmp_path), "k", 0)
    with pytest.raises(ValueError, match="reserved"):
        enqueue_to_partition("__later_recurring__", "k", tasks.record_key, str(tmp_path), "k", 0)
    assert _counts(part_db) == before


def test_a_changed_partition_count_is_refused_and_nothing_is_written(
    part_db: str, tmp_path: Path
) -> None:
    register_topic(stores_for(part_db), NAMESPACE, TOPIC, 4)
    before = _counts(part_db)
    with pytest.raises(TopicLayoutMismatch, match="4 partitions in the database but 8"):
        enqueue_to_partition(TOPIC, "k", tasks.record_key, str(tmp_path), "k", 0)
    assert _counts(part_db) == before


def test_a_changed_count_inside_atomic_leaves_the_callers_transaction_usable(
    part_db: str, tmp_path: Path
) -> None:
    register_topic(stores_for(part_db), NAMESPACE, TOPIC, 4)
    with transaction.atomic(using=part_db):
        with pytest.raises(TopicLayoutMismatch):
            enqueue_to_partition(TOPIC, "k", tasks.record_key, str(tmp_path), "k", 0)
        # The caller's transaction is not poisoned: it can still write and commit.
        assert fetch(part_db, "SELECT COUNT(*) FROM later_topic")[0][0] == 1
    assert partition_rows(part_db) == []


def test_enqueue_in_a_rolled_back_atomic_leaves_nothing(part_db: str, tmp_path: Path) -> None:
    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic(using=part_db):
        enqueue_to_partition(TOPIC, "k", tasks.record_key, str(tmp_path), "k", 0)
        assert len(partition_rows(part_db)) == 1
        raise Rollback
    counts = _counts(part_db)
    # Everything rolls back with the caller: the job, its rows, its head, and the
    # sequence allocation itself (the next enqueue gets sequence 1 again).
    assert all(value == 0 for value in counts.values()), counts
    again = enqueue_to_partition(TOPIC, "k", tasks.record_key, str(tmp_path), "k", 0)
    assert record_of(part_db, again.id).sequence == 1


def test_enqueue_in_a_committed_atomic_commits_with_the_callers_data(
    part_db: str, tmp_path: Path
) -> None:
    with transaction.atomic(using=part_db):
        result = enqueue_to_partition(TOPIC, "k", tasks.record_key, str(tmp_path), "k", 0)
    assert record_of(part_db, result.id).sequence == 1
    assert heads(part_db)[0][3] == result.id


def test_a_continuation_joins_its_partitioned_parents_partition(
    part_db: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines")
    parent = enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 0)
    behind = enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 1)
    child = continue_with(parent, tasks.record_key, path, "k", 2)
    record = record_of(part_db, child.id)
    parent_record = record_of(part_db, parent.id)
    assert (record.topic, record.partition_id) == (parent_record.topic, parent_record.partition_id)
    assert record.sequence == 3
    assert record.stage == "waiting"
    assert index_row(part_db, child.id)[0] == "waiting"
    assert [row[3] for row in partition_rows(part_db)] == [parent.id, behind.id, child.id]


def test_topics_come_from_settings(db_alias: str, tmp_path: Path) -> None:
    later = {"NAMESPACE": NAMESPACE, "DATABASE": db_alias, "TOPICS": {"a": {"partitions": 2}}}
    with override_settings(LATER=later):
        result = enqueue_to_partition("a", "x", tasks.record_key, str(tmp_path), "x", 0)
        assert record_of(db_alias, result.id).partition_id == partition_for_key("x", 2)
