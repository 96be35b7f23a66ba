"""The write batch: a job's record and its index row commit together, or not at all.

``BatchWriter.write`` writes a ``WriteBatch`` as one combined statement where the
driver combines statements (PostgreSQL) and one statement per table otherwise; both
paths are exercised here (a hand-back makes a batch uncombinable).
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, transaction

from later_django.storage.batch import WriteBatch
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import (
    Delete,
    JobIndexChange,
    JobIndexRemove,
    JobIndexRow,
    JobIndexUpsert,
    Set,
    StorageOperation,
)
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias


def index_row(
    job_id: str, stage: str, revision: int, payload_type: str | None = "t"
) -> JobIndexRow:
    return JobIndexRow(job_id, payload_type, stage, 1_000, revision, 1_000)  # type: ignore[arg-type]


def write(
    stores: Stores,
    operations: list[StorageOperation],
    changes: list[JobIndexChange],
    *,
    savepoint: bool = True,
) -> None:
    """What the engine's commit does: the batch inside a transaction when it takes
    more than one statement."""
    batch = WriteBatch("ns", operations=operations, index_changes=changes)
    with transaction.atomic(using=stores.using, savepoint=savepoint):
        stores.batch.write(batch)


def test_a_record_and_its_index_row_commit_together(db_alias: str) -> None:
    stores = stores_for(db_alias)
    write(stores, [Set("ns-job-a", b"record")], [JobIndexUpsert(index_row("a", "running", 1))])
    assert stores.kv.get("ns-job-a") == b"record"
    assert stores.index.job_index_get("ns", "a").stage == "running"
    assert stores.index.job_index_stage_counts("ns") == {"running": 1}


def test_a_failing_index_write_leaves_the_record_unwritten(db_alias: str) -> None:
    stores = stores_for(db_alias)
    with pytest.raises(DatabaseError):
        write(
            stores,
            [Set("ns-job-b", b"record")],
            [JobIndexUpsert(index_row("b", "running", 1, payload_type=None))],
        )
    assert stores.kv.get("ns-job-b") is None
    assert stores.index.job_index_get("ns", "b") is None
    assert stores.index.job_index_stage_counts("ns") == {}


def test_a_rolled_back_caller_takes_record_and_index_row_with_it(db_alias: str) -> None:
    stores = stores_for(db_alias)
    with pytest.raises(RuntimeError), transaction.atomic(using=db_alias):
        write(
            stores,
            [Set("ns-job-c", b"record")],
            [JobIndexUpsert(index_row("c", "delayed", 1))],
            savepoint=False,
        )
        raise RuntimeError("the caller's own work failed")
    assert stores.kv.get("ns-job-c") is None
    assert stores.index.job_index_get("ns", "c") is None
    assert stores.index.job_index_stage_counts("ns") == {}


def test_an_index_remove_and_a_record_delete_commit_together(db_alias: str) -> None:
    stores = stores_for(db_alias)
    write(stores, [Set("ns-job-d", b"record")], [JobIndexUpsert(index_row("d", "waiting", 1))])
    write(stores, [Delete("ns-job-d")], [JobIndexRemove("d")])
    assert stores.kv.get("ns-job-d") is None
    assert stores.index.job_index_get("ns", "d") is None
    assert stores.index.job_index_stage_counts("ns") == {}


def test_a_batch_one_statement_can_write_is_one_statement_where_the_driver_combines(
    db_alias: str,
) -> None:
    stores = stores_for(db_alias)
    batch = WriteBatch(
        "ns",
        operations=[Set("ns-job-e", b"record")],
        index_changes=[JobIndexUpsert(index_row("e", "enqueued", 1))],
    )
    batch.publishes[("default", 0, None)].append(b"message")
    assert batch.combinable()
    assert stores.batch.needs_transaction(batch) is not stores.driver.combines_statements
    with transaction.atomic(using=db_alias):
        stores.batch.write(batch)
    assert stores.kv.get("ns-job-e") == b"record"
    assert stores.queue.depth("ns", "default") == 1


def test_a_hand_back_makes_a_batch_one_statement_per_table(db_alias: str) -> None:
    stores = stores_for(db_alias)
    batch = WriteBatch("ns", owner="w", nacks=[(1, 0)], operations=[Set("ns-job-f", b"r")])
    assert not batch.combinable()
    assert stores.batch.needs_transaction(batch)
