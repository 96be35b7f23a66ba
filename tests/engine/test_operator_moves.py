"""The operator's retry of a failed job, as a pure move on a ``JobWrites``."""

from __future__ import annotations

import pytest

from later_django.core import stages
from later_django.core.commands import ExecuteJob, encode_command
from later_django.core.records import JobError, JobRecord
from later_django.engine import moves
from later_django.engine.writes import JobWrites
from later_django.exceptions import StageMoveError
from later_django.storage.types import JobIndexRemove


def failed_record(**extra: object) -> JobRecord:
    record = JobRecord(
        job_id="job-1",
        namespace="default",
        task_path="tests.engine.tasks.append_line",
        args=[],
        kwargs={},
        queue_name="emails",
        priority=3,
        backend="default",
        stage=stages.FAILED,
        stage_at_ms=1_000,
        created_at_ms=500,
        reason="boom",
        finished_at_ms=1_000,
        errors=[JobError("builtins.ValueError", "boom", 1_000, 1)],
        worker_ids=["w1"],
    )
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def test_retry_failed_enqueues_the_job_again_keeping_its_errors() -> None:
    record = failed_record()
    writes = JobWrites("default")

    moves.retry_failed(writes, record, 2_000)

    assert (record.stage, record.stage_at_ms, record.ready_at_ms) == (stages.ENQUEUED, 2_000, 2_000)
    assert (record.finished_at_ms, record.reason) == (None, None)
    assert record.history[-1] == (stages.FAILED, 1_000)
    assert len(record.errors) == 1
    assert writes.records == {record.key: (record, None)}
    payload = encode_command(ExecuteJob(record.job_id, record.task_path))
    assert dict(writes.table.publishes) == {("emails", 3, None): [payload]}
    assert writes.table.index_changes == [JobIndexRemove("job-1")]
    assert writes.metrics.transitions == [(stages.ENQUEUED, 2_000)]
    assert writes.partitions.is_empty()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"stage": stages.SUCCESS}, "only a failed job can be retried"),
        ({"topic": "orders", "partition_id": 2, "sequence": 7}, "partition 2 of topic 'orders'"),
    ],
)
def test_retry_failed_refuses_other_stages_and_partitioned_jobs(
    extra: dict[str, object], message: str
) -> None:
    record = failed_record(**extra)
    writes = JobWrites("default")

    with pytest.raises(StageMoveError, match=message):
        moves.retry_failed(writes, record, 2_000)

    assert writes.is_empty() and writes.metrics.is_empty()
    assert record.stage == extra.get("stage", stages.FAILED)
