"""Running partitioned jobs with in-process workers: order, blocked heads, retries,
continuations, fencing, and the waits recorded as ``sequential``."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.test import override_settings

from later_django.api import continue_with, enqueue_to_partition
from later_django.compat.tasks import TaskResultStatus
from later_django.conf import later_settings
from later_django.core.clock import now_ms
from later_django.core.topics import partition_for_key
from later_django.engine import metrics
from later_django.engine.execution.finish import finish_and_continue
from later_django.engine.execution.heads import start_heads
from later_django.engine.execution.values import Outcome
from later_django.storage.stores import stores_for
from later_django.worker.runner import Worker, WorkerOptions
from tests.partitions import tasks
from tests.partitions.conftest import NAMESPACE, TOPIC, TOPICS
from tests.partitions.support import fetch, heads, index_row, partition_rows, record_of, snapshot

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def run_burst(concurrency: int = 4) -> None:
    assert Worker(WorkerOptions(queues=["default"], burst=True, concurrency=concurrency)).run() == 0


def run_until(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Runs burst workers until ``condition()`` holds (a burst worker leaves while a
    delayed head is not yet due)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        run_burst()
        time.sleep(0.05)


def status(result) -> TaskResultStatus:  # type: ignore[no-untyped-def]
    return result.task.get_result(result.id).status


def test_jobs_of_each_key_run_in_enqueue_order(part_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "lines")
    results = []
    for n in range(12):
        for key in ("a", "b", "c", "d", "e"):
            results.append(enqueue_to_partition(TOPIC, key, tasks.record_key, path, key, n))
    run_until(lambda: all(status(r) == TaskResultStatus.SUCCESSFUL for r in results))
    lines = tasks.read_lines(path)
    for key in ("a", "b", "c", "d", "e"):
        assert [line["n"] for line in lines if line["key"] == key] == list(range(12))
    assert heads(part_db) == []
    assert partition_rows(part_db) == []


def test_a_delayed_head_blocks_its_partition_until_due(part_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "lines")
    due = datetime.now(UTC) + timedelta(seconds=2)
    first = enqueue_to_partition(TOPIC, "k", tasks.record_key.using(run_after=due), path, "k", 0)
    second = enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 1)
    run_burst()
    # Not due yet: the delayed head blocks the ready job behind it.
    assert tasks.read_lines(path) == []
    assert status(second) == TaskResultStatus.READY
    assert heads(part_db)[0][3] == first.id
    assert heads(part_db)[0][5] == "delayed"
    run_until(lambda: status(second) == TaskResultStatus.SUCCESSFUL)
    lines = tasks.read_lines(path)
    assert [line["n"] for line in lines] == [0, 1]
    assert lines[0]["at"] >= due.timestamp() - 0.01


def test_a_failing_head_retries_then_fails_then_the_next_job_runs(
    db_alias: str, tmp_path: Path
) -> None:
    later = {
        "NAMESPACE": NAMESPACE,
        "DATABASE": db_alias,
        "TOPICS": TOPICS,
        "RETRY": {"max_retries": 2, "backoff": "fixed", "initial": 0.3, "jitter": False},
    }
    path = str(tmp_path / "lines")
    with override_settings(LATER=later):
        failing = enqueue_to_partition(TOPIC, "k", tasks.always_fails, path, "k", 0)
        after = enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 1)
        run_until(lambda: status(after) == TaskResultStatus.SUCCESSFUL)
        assert status(failing) == TaskResultStatus.FAILED
    lines = tasks.read_lines(path)
    assert [line.get("event", "run") for line in lines] == ["fail", "fail", "fail", "run"]
    assert len(record_of(db_alias, failing.id).errors) == 3
    # The failed head left its partition; the index shows it failed.
    assert index_row(db_alias, failing.id)[0] == "failed"
    assert partition_rows(db_alias) == []
    assert heads(db_alias) == []


def test_a_retrying_head_is_requeued_with_its_retry_time(db_alias: str, tmp_path: Path) -> None:
    later = {
        "NAMESPACE": NAMESPACE,
        "DATABASE": db_alias,
        "TOPICS": TOPICS,
        "RETRY": {"max_retries": 1, "backoff": "fixed", "initial": 60, "jitter": False},
    }
    path = str(tmp_path / "lines")
    with override_settings(LATER=later):
        failing = enqueue_to_partition(TOPIC, "k", tasks.always_fails, path, "k", 0)
        after = enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 1)
        before = now_ms()
        run_burst()
        assert status(after) == TaskResultStatus.READY
    [head] = heads(db_alias)
    assert head[3] == failing.id
    assert head[5] == "requeued"
    assert before + 59_000 <= head[4] <= now_ms() + 60_000
    assert index_row(db_alias, failing.id)[0] == "requeued"
    assert len(tasks.read_lines(path)) == 1


def test_a_continuation_on_a_partition_runs_after_its_parent_and_before_later_jobs(
    part_db: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines")
    parent = enqueue_to_partition(TOPIC, "k", tasks.slow_record_key, path, "k", 0, 0.2)
    child = continue_with(parent, tasks.record_key, path, "k", 1)
    later_job = enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 2)
    run_until(lambda: status(later_job) == TaskResultStatus.SUCCESSFUL)
    assert status(child) == TaskResultStatus.SUCCESSFUL
    lines = [line["n"] for line in tasks.read_lines(path)]
    assert lines == [0, 0, 1, 2]


def test_waits_of_partitioned_jobs_are_recorded_as_sequential(part_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "lines")
    result = enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 0)
    run_until(lambda: status(result) == TaskResultStatus.SUCCESSFUL)
    metrics.flush()
    modes = fetch(
        part_db,
        "SELECT mode, SUM(count) FROM later_job_wait_metrics WHERE namespace = %s GROUP BY mode",
        [NAMESPACE],
    )
    assert modes == [("sequential", 1)]
    assert index_row(part_db, result.id)[4] == "sequential"


def _take(alias: str, owner: str) -> dict:
    store = stores_for(alias).partitions
    partitions = [(TOPIC, p) for p in range(8)]
    return store.take(NAMESPACE, owner, partitions, now_ms() + 30_000, now_ms())


def test_a_reclaimed_lease_makes_the_old_owners_completion_change_nothing(
    part_db: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines")
    enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 0)
    enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 1)
    settings = later_settings()
    store = stores_for(part_db).partitions
    epochs = _take(part_db, "old")
    assert set(epochs.values()) == {1}
    [claim] = store.claim_heads(NAMESPACE, "old", now_ms(), [], 16)
    [started] = start_heads(
        [claim],
        stores=stores_for(part_db),
        namespace=NAMESPACE,
        worker_id="old",
        lease_ms=30_000,
        settings=settings,
    )
    assert heads(part_db)[0][5] == "running"
    # The old owner goes silent; its lease lapses and "new" takes it over.
    with connections[part_db].cursor() as cursor:
        cursor.execute("UPDATE later_partition_lease SET lease_until = 0")
    new_epochs = _take(part_db, "new")
    assert new_epochs[claim.partition] == 2
    before = snapshot(part_db)

    records, _ = finish_and_continue(
        [Outcome(started, return_value=0)],
        stores=stores_for(part_db),
        namespace=NAMESPACE,
        worker_id="old",
        settings=settings,
    )

    assert records[0].stage == "running"
    assert snapshot(part_db) == before
    # The new owner sees the running head as a lost attempt and retries it.
    [again] = store.claim_heads(NAMESPACE, "new", now_ms(), [], 16)
    assert (again.job_id, again.stage, again.epoch) == (claim.job_id, "running", 2)
    start_heads(
        [again],
        stores=stores_for(part_db),
        namespace=NAMESPACE,
        worker_id="new",
        lease_ms=30_000,
        settings=settings,
    )
    record = record_of(part_db, claim.job_id)
    assert record.errors[-1].exception_class_path == "later_django.exceptions.WorkerLost"
    assert record.stage in ("requeued", "enqueued")
    assert heads(part_db)[0][5] == record.stage


def test_a_lease_taken_from_another_owner_gets_the_next_epoch(part_db: str) -> None:
    store = stores_for(part_db).partitions
    assert _take(part_db, "a")[(TOPIC, 0)] == 1
    # Held and current: another owner cannot take it, renewing keeps the epoch.
    assert _take(part_db, "b") == {}
    assert _take(part_db, "a")[(TOPIC, 0)] == 1
    store.release(NAMESPACE, "a", [(TOPIC, 0)])
    assert _take(part_db, "b")[(TOPIC, 0)] == 2
    assert store.fence(NAMESPACE, "a", [(TOPIC, 0, 1)], now_ms()) == set()
    assert store.fence(NAMESPACE, "b", [(TOPIC, 0, 2)], now_ms() + 1000) == {(TOPIC, 0)}


def test_a_batch_with_one_stale_partition_writes_only_the_others(
    part_db: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines")
    # Two keys on two different partitions, two jobs each.
    keys = ["k0", "k1", "k2", "k3", "k4", "k5"]
    first_key = keys[0]
    other_key = next(k for k in keys if partition_for_key(k, 8) != partition_for_key(first_key, 8))
    for key in (first_key, other_key):
        for n in range(2):
            enqueue_to_partition(TOPIC, key, tasks.record_key, path, key, n)
    settings = later_settings()
    store = stores_for(part_db).partitions
    _take(part_db, "old")
    claims = store.claim_heads(NAMESPACE, "old", now_ms(), [], 16)
    assert len(claims) == 2
    started = start_heads(
        claims,
        stores=stores_for(part_db),
        namespace=NAMESPACE,
        worker_id="old",
        lease_ms=30_000,
        settings=settings,
    )
    stale = started[0]
    with connections[part_db].cursor() as cursor:
        cursor.execute(
            "UPDATE later_partition_lease SET lease_until = 0 "
            "WHERE topic = %s AND partition_id = %s",
            [TOPIC, stale.record.partition_id],
        )
    store.take(NAMESPACE, "new", [stale.partition], now_ms() + 30_000, now_ms())

    records, following = finish_and_continue(
        [Outcome(job, return_value=None) for job in started],
        stores=stores_for(part_db),
        namespace=NAMESPACE,
        worker_id="old",
        settings=settings,
        slots=4,
    )

    assert [record.stage for record in records] == ["running", "success"]
    assert record_of(part_db, stale.record.job_id).stage == "running"
    assert record_of(part_db, started[1].record.job_id).stage == "success"
    # The valid partition's next job started in the same transaction.
    [next_job] = following
    assert next_job.record.partition_id == started[1].record.partition_id
    assert record_of(part_db, next_job.record.job_id).stage == "running"
    by_partition = {head[1]: head for head in heads(part_db)}
    assert by_partition[started[1].record.partition_id][3] == next_job.record.job_id
    assert by_partition[started[1].record.partition_id][5] == "running"
    assert by_partition[stale.record.partition_id][3] == stale.record.job_id
