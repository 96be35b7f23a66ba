"""Stage counts and metrics agree with what the jobs did."""

from __future__ import annotations

import pytest

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResultStatus
from later_django.core.clock import now_ms
from later_django.engine import metrics
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

SUCCEEDING = 7
FAILING = 3


def test_stage_counts_and_flushed_metrics_match_successes_failures_and_attempts(
    engine_db: str,
) -> None:
    storage = stores_for(engine_db)
    successes = enqueue_many(tasks.add, [((n, n), {}) for n in range(SUCCEEDING)])
    failures = enqueue_many(tasks.fail_once_without_retry, [(("no",), {})] * FAILING)
    assert storage.index.job_index_stage_counts(NAMESPACE) == {"enqueued": SUCCEEDING + FAILING}

    results = run_until_finished([job.id for job in successes + failures])
    metrics.flush()

    statuses = [found.status for found in results]
    assert statuses == [TaskResultStatus.SUCCESSFUL] * SUCCEEDING + [TaskResultStatus.FAILED] * (
        FAILING
    )
    assert storage.index.job_index_stage_counts(NAMESPACE) == {
        "success": SUCCEEDING,
        "failed": FAILING,
    }
    now = now_ms()
    assert storage.metrics.recent_transition_count(NAMESPACE, "success", now) == SUCCEEDING
    assert storage.metrics.recent_transition_count(NAMESPACE, "failed", now) == FAILING
    assert (
        storage.metrics.recent_transition_count(NAMESPACE, "enqueued", now) == SUCCEEDING + FAILING
    )
    started_attempts = sum(found.attempts for found in results)
    assert started_attempts == SUCCEEDING + FAILING
    assert storage.metrics.recent_transition_count(NAMESPACE, "running", now) == started_attempts
    waits = storage.metrics.recent_wait_stats(NAMESPACE, "regular", now)
    assert waits.count == started_attempts
    assert 0 <= waits.avg_ms <= waits.max_ms


def test_retries_count_every_started_attempt_in_the_wait_metrics(engine_db: str) -> None:
    storage = stores_for(engine_db)
    enqueued = tasks.fail_always.enqueue("again")

    [failed] = run_until_finished([enqueued.id])
    metrics.flush()

    now = now_ms()
    assert failed.attempts == 3
    assert storage.metrics.recent_wait_stats(NAMESPACE, "regular", now).count == 3
    assert storage.metrics.recent_transition_count(NAMESPACE, "running", now) == 3
    assert storage.metrics.recent_transition_count(NAMESPACE, "requeued", now) == 2
    assert storage.metrics.recent_transition_count(NAMESPACE, "failed", now) == 1
    # The first enqueue, then each retry made ready again once its back-off ended.
    assert storage.metrics.recent_transition_count(NAMESPACE, "enqueued", now) == 3
    assert storage.index.job_index_stage_counts(NAMESPACE) == {"failed": 1}


def test_metrics_stay_in_memory_until_flushed(engine_db: str) -> None:
    storage = stores_for(engine_db)
    metrics.accumulator.take()
    tasks.add.enqueue(1, 2)
    assert storage.metrics.recent_transition_count(NAMESPACE, "enqueued", now_ms()) == 0

    assert metrics.flush() == 1

    assert storage.metrics.recent_transition_count(NAMESPACE, "enqueued", now_ms()) == 1
