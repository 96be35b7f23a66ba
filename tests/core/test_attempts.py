"""Attempt outcomes: read from the stage an attempt's record moved to."""

from __future__ import annotations

import pytest

from later_django.core import attempts, stages


@pytest.mark.parametrize(
    ("stage", "timed_out", "outcome"),
    [
        (stages.SUCCESS, False, attempts.SUCCEEDED),
        (stages.REQUEUED, False, attempts.RETRIED),
        (stages.ENQUEUED, False, attempts.RETRIED),
        (stages.FAILED, False, attempts.FAILED),
        (stages.CANCELLED, False, attempts.CANCELLED),
        (stages.REQUEUED, True, attempts.TIMED_OUT),
        (stages.FAILED, True, attempts.TIMED_OUT),
        (stages.CANCELLED, True, attempts.CANCELLED),
    ],
)
def test_the_stage_after_an_attempt_names_its_outcome(
    stage: str, timed_out: bool, outcome: str
) -> None:
    assert attempts.attempt_outcome(stage, timed_out=timed_out) == outcome


def test_no_attempt_ends_running() -> None:
    with pytest.raises(ValueError, match="no attempt ends in stage 'running'"):
        attempts.attempt_outcome(stages.RUNNING, timed_out=False)


def test_the_failing_outcomes_are_outcomes() -> None:
    assert set(attempts.FAILING_OUTCOMES) < set(attempts.ATTEMPT_OUTCOMES)
    assert len(set(attempts.ATTEMPT_OUTCOMES)) == len(attempts.ATTEMPT_OUTCOMES) == 5
