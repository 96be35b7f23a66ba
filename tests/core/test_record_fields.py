"""``decode_fields``: a few attributes of a stored record, as ``decode_record`` reads
them, without building the record."""

from __future__ import annotations

import msgpack
import pytest

from later_django.core.records import JobRecord, decode_fields, decode_record, encode_record
from later_django.exceptions import RecordDecodeError

NAMES = ("task_path", "stage", "parent_job_id", "parent_job_ids", "workflow_id", "finished_at_ms")


def test_decode_fields_reads_the_attributes_decode_record_reads() -> None:
    record = JobRecord(
        job_id="01AAAAAAAAAAAAAAAAAAAAAAAA",
        namespace="default",
        task_path="app.tasks.ship",
        args=[1],
        kwargs={},
        queue_name="default",
        priority=0,
        backend="default",
        stage="waiting",
        stage_at_ms=5,
        created_at_ms=4,
        parent_job_ids=["01AAAAAAAAAAAAAAAAAAAAAAAB", "01AAAAAAAAAAAAAAAAAAAAAAAC"],
        workflow_id="01AAAAAAAAAAAAAAAAAAAAAAAD",
    )
    data = encode_record(record)
    full = decode_record(data)
    assert decode_fields(data, NAMES) == {name: getattr(full, name) for name in NAMES}
    assert decode_fields(data, NAMES)["parent_job_id"] is None


@pytest.mark.parametrize("data", [b"\xc1", msgpack.packb([1]), msgpack.packb({"v": 999})])
def test_decode_fields_refuses_what_is_not_a_record(data: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_fields(data, NAMES)
