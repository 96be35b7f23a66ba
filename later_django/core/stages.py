"""The stage machine: which moves a job may make, and how a move is recorded.

Live stages: ``delayed``, ``waiting``, ``enqueued``, ``running``, ``requeued``.
Finished: ``success``, ``failed`` and ``cancelled`` (they get an expiry); every
live stage may move to ``cancelled`` (:mod:`later_django.engine.cancellation`). Each move appends
the stage being left to the record's history, so the revision rises by one.
One move exists for operators only: ``failed`` -> ``enqueued`` (the dashboard's
retry), see :data:`OPERATOR_MOVES`.
"""

from __future__ import annotations

from later_django.core.records import JobRecord
from later_django.exceptions import StageMoveError

DELAYED = "delayed"
WAITING = "waiting"
ENQUEUED = "enqueued"
RUNNING = "running"
REQUEUED = "requeued"
SUCCESS = "success"
FAILED = "failed"
CANCELLED = "cancelled"

#: The only list of stages. Live stages never carry an expiry; finished ones get
#: ``RETENTION``. ``later_stage_counts`` counts every stage (from migration 0010 its
#: triggers count whatever stage a row holds, so a new stage needs no migration).
LIVE_STAGES: tuple[str, ...] = (DELAYED, WAITING, ENQUEUED, RUNNING, REQUEUED)
FINISHED_STAGES: tuple[str, ...] = (SUCCESS, FAILED, CANCELLED)
ALL_STAGES: tuple[str, ...] = LIVE_STAGES + FINISHED_STAGES

INITIAL_STAGES = frozenset({DELAYED, WAITING, ENQUEUED})
FINISHED = frozenset(FINISHED_STAGES)
#: The finished stages whose ``on="success"`` continuations fail with them.
UNSUCCESSFUL = frozenset({FAILED, CANCELLED})

ALLOWED_MOVES: dict[str, frozenset[str]] = {
    DELAYED: frozenset({ENQUEUED, CANCELLED}),
    WAITING: frozenset({ENQUEUED, FAILED, CANCELLED}),
    ENQUEUED: frozenset({RUNNING, CANCELLED}),
    RUNNING: frozenset({SUCCESS, REQUEUED, FAILED, CANCELLED}),
    REQUEUED: frozenset({ENQUEUED, CANCELLED}),
    SUCCESS: frozenset(),
    FAILED: frozenset(),
    CANCELLED: frozenset(),
}


#: Moves only an operator may make (the dashboard's "retry" of a failed job, a
#: workflow's retry: its failed and cancelled jobs, and what lies downstream of them,
#: run again or wait for parents that run again), on top of :data:`ALLOWED_MOVES`;
#: the worker never passes ``operator=True``.
OPERATOR_MOVES: dict[str, frozenset[str]] = {
    FAILED: frozenset({ENQUEUED, WAITING}),
    CANCELLED: frozenset({ENQUEUED, WAITING}),
    # A job downstream of a failed one that ran all the same (an on="finish" child).
    SUCCESS: frozenset({ENQUEUED, WAITING}),
}


def move(record: JobRecord, stage: str, at_ms: int, *, operator: bool = False) -> None:
    """Moves ``record`` to ``stage`` at ``at_ms``; ``StageMoveError`` for a move not
    in :data:`ALLOWED_MOVES` (nor, with ``operator``, in :data:`OPERATOR_MOVES`);
    the record is then unchanged."""
    allowed = ALLOWED_MOVES.get(record.stage)
    if operator and record.stage in OPERATOR_MOVES:
        allowed = (allowed or frozenset()) | OPERATOR_MOVES[record.stage]
    if allowed is None or stage not in allowed:
        raise StageMoveError(
            f"job {record.job_id} cannot move from {record.stage!r} to {stage!r}; "
            f"allowed from {record.stage!r}: {sorted(allowed or ())}"
        )
    record.history.append((record.stage, record.stage_at_ms))
    record.stage = stage
    record.stage_at_ms = at_ms
