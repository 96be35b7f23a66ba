"""core.stages: the one list of stages and the moves between them."""

from __future__ import annotations

import pytest

from later_django.core import stages
from later_django.core.records import JobRecord
from later_django.exceptions import StageMoveError


def record(stage: str) -> JobRecord:
    return JobRecord(
        job_id="01J",
        namespace="ns",
        task_path="tests.tasks.t",
        args=[],
        kwargs={},
        queue_name="default",
        priority=0,
        backend="default",
        stage=stage,
        stage_at_ms=1,
        created_at_ms=1,
    )


def test_the_stage_list_is_live_then_finished_with_no_repeats() -> None:
    assert stages.ALL_STAGES == stages.LIVE_STAGES + stages.FINISHED_STAGES
    assert len(set(stages.ALL_STAGES)) == len(stages.ALL_STAGES) == 8
    assert set(stages.ALLOWED_MOVES) == set(stages.ALL_STAGES)
    assert frozenset(stages.FINISHED_STAGES) == stages.FINISHED
    assert all(not stages.ALLOWED_MOVES[stage] for stage in stages.FINISHED_STAGES)


def test_a_move_records_the_stage_it_leaves() -> None:
    job = record(stages.ENQUEUED)
    stages.move(job, stages.RUNNING, 5)
    assert (job.stage, job.stage_at_ms, job.history) == (stages.RUNNING, 5, [("enqueued", 1)])


@pytest.mark.parametrize(
    ("start", "target"),
    [("success", "enqueued"), ("enqueued", "success"), ("delayed", "running")],
)
def test_a_move_the_machine_forbids_raises_and_leaves_the_record_alone(
    start: str, target: str
) -> None:
    job = record(start)
    with pytest.raises(StageMoveError, match=f"cannot move from '{start}' to '{target}'"):
        stages.move(job, target, 5)
    assert (job.stage, job.history) == (start, [])


def test_only_an_operator_may_retry_a_failed_job() -> None:
    with pytest.raises(StageMoveError):
        stages.move(record(stages.FAILED), stages.ENQUEUED, 5)
    job = record(stages.FAILED)
    stages.move(job, stages.ENQUEUED, 5, operator=True)
    assert job.stage == stages.ENQUEUED
