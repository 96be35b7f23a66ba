"""A job with ``run_after`` in the future waits, delayed, until it is due, then runs."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from later_django.compat.tasks import TaskResultStatus
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, result, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_a_job_due_later_is_ready_and_delayed_and_not_run_before_it_is_due(
    engine_db: str,
) -> None:
    run_after = timezone.now() + timedelta(seconds=1.5)
    enqueued = tasks.add.using(run_after=run_after).enqueue(1, 1)

    assert enqueued.status == TaskResultStatus.READY
    storage = stores_for(engine_db)
    assert storage.index.job_index_get(NAMESPACE, enqueued.id).stage == "delayed"
    assert storage.index.job_index_stage_counts(NAMESPACE) == {"delayed": 1}
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 0

    run_burst()

    assert timezone.now() < run_after, "the burst worker took too long to tell anything"
    still = result(enqueued.id)
    assert still.status == TaskResultStatus.READY
    assert still.started_at is None
    assert still.worker_ids == []
    assert storage.index.job_index_get(NAMESPACE, enqueued.id).stage == "delayed"


def test_a_delayed_job_runs_once_it_is_due(engine_db: str) -> None:
    run_after = timezone.now() + timedelta(seconds=1.5)
    enqueued = tasks.add.using(run_after=run_after).enqueue(2, 3)

    deadline = time.monotonic() + 10
    while True:
        run_burst()
        found = result(enqueued.id)
        if found.status == TaskResultStatus.SUCCESSFUL or time.monotonic() > deadline:
            break
        time.sleep(0.05)

    assert found.status == TaskResultStatus.SUCCESSFUL
    assert found.return_value == 5
    assert found.started_at >= run_after - timedelta(milliseconds=1)
    storage = stores_for(engine_db)
    assert storage.index.job_index_stage_counts(NAMESPACE) == {"success": 1}
    # The schedule entry was consumed by the promotion.
    assert storage.kv.key_scan(f"{NAMESPACE}-due-", f"{NAMESPACE}-due.", 10) == []
