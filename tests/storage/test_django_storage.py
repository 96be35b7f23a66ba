"""``DjangoStorage``: a job's record and its index row commit together, or not at all."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, transaction

from later_django.storage.contract import Storage
from later_django.storage.django import DjangoStorage
from later_django.storage.types import JobIndexRemove, JobIndexRow, JobIndexUpsert, Set

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def index_row(
    job_id: str, stage: str, revision: int, payload_type: str | None = "t"
) -> JobIndexRow:
    return JobIndexRow(job_id, payload_type, stage, 1_000, revision, 1_000)  # type: ignore[arg-type]


def test_django_storage_implements_every_method_of_the_contract() -> None:
    assert not DjangoStorage.__abstractmethods__
    assert issubclass(DjangoStorage, Storage)


def test_a_record_and_its_index_row_commit_together(db_alias: str) -> None:
    storage = DjangoStorage(db_alias)
    storage.apply_with_job_index(
        [Set("ns-job-a", b"record")], "ns", [JobIndexUpsert(index_row("a", "running", 1))]
    )
    assert storage.get("ns-job-a") == b"record"
    assert storage.job_index_get("ns", "a").stage == "running"
    assert storage.job_index_stage_counts("ns") == {"running": 1}


def test_a_failing_index_write_leaves_the_record_unwritten(db_alias: str) -> None:
    storage = DjangoStorage(db_alias)
    with pytest.raises(DatabaseError):
        storage.apply_with_job_index(
            [Set("ns-job-b", b"record")],
            "ns",
            [JobIndexUpsert(index_row("b", "running", 1, payload_type=None))],
        )
    assert storage.get("ns-job-b") is None
    assert storage.job_index_get("ns", "b") is None
    assert storage.job_index_stage_counts("ns") == {}


def test_a_rolled_back_caller_takes_record_and_index_row_with_it(db_alias: str) -> None:
    storage = DjangoStorage(db_alias)
    with pytest.raises(RuntimeError), transaction.atomic(using=db_alias):
        storage.apply_with_job_index(
            [Set("ns-job-c", b"record")],
            "ns",
            [JobIndexUpsert(index_row("c", "delayed", 1))],
            savepoint=False,
        )
        raise RuntimeError("the caller's own work failed")
    assert storage.get("ns-job-c") is None
    assert storage.job_index_get("ns", "c") is None
    assert storage.job_index_stage_counts("ns") == {}


def test_an_index_remove_and_a_record_delete_commit_together(db_alias: str) -> None:
    from later_django.storage.types import Delete

    storage = DjangoStorage(db_alias)
    storage.apply_with_job_index(
        [Set("ns-job-d", b"record")], "ns", [JobIndexUpsert(index_row("d", "waiting", 1))]
    )
    storage.apply_with_job_index([Delete("ns-job-d")], "ns", [JobIndexRemove("d")])
    assert storage.get("ns-job-d") is None
    assert storage.job_index_get("ns", "d") is None
    assert storage.job_index_stage_counts("ns") == {}
