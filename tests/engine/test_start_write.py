"""A claimed job's start write and its launch, and no attempt goes uncounted.

On PostgreSQL and MySQL/MariaDB the worker hands a planned batch's jobs to their
threads, then writes the start (record ``running`` with the attempt, index row,
execution lease); on SQLite, where one writer holds the lock, the start commits
first (decision 112). A
job whose process dies before that write commits leaves its attempt in its
message's delivery count: the next claim sees a second delivery of a job still
``enqueued`` and records the lost attempt (``WorkerLost``), so a poison job is
counted, not delivered again and again as attempt 1. A start write that fails is
written again, under the batch's claims, before any outcome (launched first) or
hands the batch back (written first). These tests hold that write back, or make it
fail, through Django's ``execute_wrapper`` on the worker's connection (its main
loop runs on the test's thread here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
from django.db import OperationalError, connections
from django.test.utils import CaptureQueriesContext

from later_django.conf import later_settings
from later_django.core.keys import job_key
from later_django.core.records import decode_record
from later_django.engine.execution.start import plan_batch
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, row_counts, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: How long the held start write waits to see whether the task begins.
TASK_START_SECONDS = 1.0
START_WRITE = "INSERT INTO later_job_execution"
WORKER_LOST = "later_django.exceptions.WorkerLost"


class StartWriteHold:
    """An ``execute_wrapper`` that stops the first start write of a batch (the
    statement acquiring execution leases) until ``started`` exists, notes whether
    it did in time, and then runs it, or raises instead when ``fail``."""

    def __init__(self, started: Path, gate: Path, *, fail: bool) -> None:
        self.started = started
        self.gate = gate
        self.fail = fail
        self.task_had_started: bool | None = None

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if self.task_had_started is None and START_WRITE in sql:
            deadline = time.monotonic() + TASK_START_SECONDS
            while not self.started.exists() and time.monotonic() < deadline:
                time.sleep(0.005)
            self.task_had_started = self.started.exists()
            self.gate.touch()
            if self.fail:
                raise OperationalError("the start write fails (test)")
        return execute(sql, params, many, context)


def _run_held(engine_db: str, tmp_path: Path, *, fail: bool) -> tuple[StartWriteHold, str, Path]:
    started, gate = tmp_path / "started", tmp_path / "gate"
    enqueued = tasks.record_then_wait.enqueue(str(started), str(gate), 5.0)
    hold = StartWriteHold(started, gate, fail=fail)
    with connections[engine_db].execute_wrapper(hold):
        run_burst()
    return hold, enqueued.id, started


def _assert_ran_once_and_succeeded(engine_db: str, job_id: str, started: Path) -> None:
    stores = stores_for(engine_db)
    record = decode_record(stores.kv.get(job_key(NAMESPACE, job_id)))
    assert record.stage == "success"
    assert record.attempts == 1
    assert record.errors == []
    assert record.return_value == 1
    assert tasks.read_lines(started) == ["1"]
    assert stores.index.job_index_stage_counts(NAMESPACE) == {"success": 1}
    counts = row_counts(engine_db, ("later_delivery_queue", "later_job_execution"))
    assert counts == {"later_delivery_queue": 0, "later_job_execution": 0}


def _options(stores: Any, worker_id: str = "planner") -> dict[str, Any]:
    return {
        "stores": stores,
        "namespace": NAMESPACE,
        "worker_id": worker_id,
        "lease_ms": 30_000,
        "settings": later_settings(),
    }


def _launched_first(engine_db: str) -> bool:
    """Whether the worker launches a batch before its start write: wherever writers
    do not queue for one lock (PostgreSQL, MySQL/MariaDB), not on SQLite."""
    return not stores_for(engine_db).driver.serializes_writes


def test_a_job_begins_while_its_start_write_is_on_its_way_unless_on_sqlite(
    engine_db: str, tmp_path: Path
) -> None:
    """PostgreSQL and MySQL/MariaDB: the task has begun while its start write waits;
    SQLite: not before the write commits."""
    hold, job_id, started = _run_held(engine_db, tmp_path, fail=False)

    assert hold.task_had_started is _launched_first(engine_db)
    _assert_ran_once_and_succeeded(engine_db, job_id, started)


def test_a_failed_start_write_is_written_again_or_handed_back(
    engine_db: str, tmp_path: Path
) -> None:
    """PostgreSQL, MySQL/MariaDB: the job already runs when its start write fails,
    and the worker writes the start again at its next turn (its claim still held),
    then the outcome. SQLite: nothing of the batch ran, it is handed back and claimed again.
    Either way the job ran once, as attempt 1, and nothing is left behind."""
    hold, job_id, started = _run_held(engine_db, tmp_path, fail=True)

    assert hold.task_had_started is _launched_first(engine_db)
    _assert_ran_once_and_succeeded(engine_db, job_id, started)


def test_a_second_delivery_of_a_job_still_enqueued_records_the_lost_attempt(
    engine_db: str, tmp_path: Path
) -> None:
    """A worker claimed the message and stopped before writing the start (its claim
    lapsed): the next claim is the message's second delivery, and its plan fails
    that attempt as ``WorkerLost`` instead of starting attempt 1 again."""
    stores = stores_for(engine_db)
    enqueued = tasks.attempt_seen.enqueue(str(tmp_path / "attempts"))
    [first] = stores.queue.claim(NAMESPACE, ["default"], "lost", 1, batch_size=1)
    assert first.deliveries == 1
    time.sleep(0.01)  # the 1 ms claim lapses: the claimer is gone

    [second] = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    start = plan_batch([second], **_options(stores))
    start.commit()

    assert second.sequence == first.sequence
    assert second.deliveries == 2
    assert start.started == []
    record = decode_record(stores.kv.get(job_key(NAMESPACE, enqueued.id)))
    assert record.attempts == 1
    assert record.worker_ids == ["unknown"]
    [error] = record.errors
    assert error.exception_class_path == WORKER_LOST
    assert error.attempt == 1
    assert "delivered 2 times and no start was written" in error.traceback
    # The task's retry policy (one retry, at once) decides what follows.
    assert record.stage == "enqueued"
    assert row_counts(engine_db, ("later_delivery_queue", "later_job_execution")) == {
        "later_delivery_queue": 1,
        "later_job_execution": 0,
    }
    [retry] = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    assert retry.sequence != first.sequence
    assert retry.deliveries == 1


def test_a_lost_attempt_without_retries_left_fails_the_job(engine_db: str) -> None:
    stores = stores_for(engine_db)
    enqueued = tasks.fail_once_without_retry.enqueue("x")
    stores.queue.claim(NAMESPACE, ["default"], "lost", 1, batch_size=1)
    time.sleep(0.01)

    messages = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    plan_batch(messages, **_options(stores)).commit()

    record = decode_record(stores.kv.get(job_key(NAMESPACE, enqueued.id)))
    assert (record.stage, record.attempts) == ("failed", 1)
    assert [error.exception_class_path for error in record.errors] == [WORKER_LOST]
    assert row_counts(engine_db, ("later_delivery_queue",)) == {"later_delivery_queue": 0}


def test_a_handed_back_delivery_is_not_a_lost_attempt(engine_db: str) -> None:
    """A hand-back (a plan that failed, a job another worker runs, the shutdown
    timeout) takes its delivery back: the next claim is a first delivery again."""
    stores = stores_for(engine_db)
    enqueued = tasks.add.enqueue(1, 2)
    [first] = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    assert stores.queue.nack("planner", [first.sequence]) == 1

    [again] = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    start = plan_batch([again], **_options(stores))

    assert again.deliveries == 1
    assert [job.record.job_id for job in start.started] == [enqueued.id]


def test_writing_a_start_again_needs_every_claim_of_the_batch(engine_db: str) -> None:
    """``commit_again`` after a failed first write: while the claims are held it
    writes the start (the running job keeps its record); once a claim was taken by
    another worker it writes nothing and gives up every job of the batch."""
    stores = stores_for(engine_db)
    held = tasks.add.enqueue(1, 2)
    messages = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    start = plan_batch(messages, **_options(stores))

    launch, abandon = start.commit_again()

    assert (launch, abandon) == ([], [])
    stored = decode_record(stores.kv.get(job_key(NAMESPACE, held.id)))
    [job] = start.started
    assert (stored.stage, stored.attempts) == ("running", 1)
    assert stored.last_attempted_at_ms == job.record.last_attempted_at_ms == start.now

    taken = tasks.add.enqueue(3, 4)
    messages = stores.queue.claim(NAMESPACE, ["default"], "slow", 1, batch_size=1)
    start = plan_batch(messages, **_options(stores, "slow"))
    time.sleep(0.01)
    stores.queue.claim(NAMESPACE, ["default"], "other", 30_000, batch_size=1)

    launch, abandon = start.commit_again()

    assert launch == []
    assert [job.record.job_id for job in abandon] == [taken.id]
    stored = decode_record(stores.kv.get(job_key(NAMESPACE, taken.id)))
    assert (stored.stage, stored.attempts) == ("enqueued", 0)


def test_a_planned_batch_writes_nothing_until_it_commits(engine_db: str) -> None:
    """``plan_batch`` decides every message's move and writes none: the job is
    still ``enqueued``; the message that is not a job is in ``unstarted``, the
    one a failed start write hands back."""
    stores = stores_for(engine_db)
    enqueued = tasks.add.enqueue(1, 2)
    stores.queue.publish(NAMESPACE, "default", [b"\xc1 not a command"])
    messages = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=2)
    assert len(messages) == 2
    settings = later_settings()

    start = plan_batch(
        messages,
        stores=stores,
        namespace=NAMESPACE,
        worker_id="planner",
        lease_ms=30_000,
        settings=settings,
    )

    [job] = start.started
    assert job.record.job_id == enqueued.id
    assert job.record.stage == "running"
    [not_a_job] = [message for message in messages if message.sequence != job.sequence]
    assert start.unstarted(messages) == [not_a_job.sequence]
    stored = decode_record(stores.kv.get(job_key(NAMESPACE, enqueued.id)))
    assert stored.stage == "enqueued"
    assert row_counts(engine_db, ("later_delivery_queue", "later_job_execution")) == {
        "later_delivery_queue": 2,
        "later_job_execution": 0,
    }

    start.commit()

    stored = decode_record(stores.kv.get(job_key(NAMESPACE, enqueued.id)))
    assert (stored.stage, stored.attempts) == ("running", 1)
    assert row_counts(engine_db, ("later_delivery_queue", "later_job_execution")) == {
        "later_delivery_queue": 1,
        "later_job_execution": 1,
    }


def test_plan_batch_reads_only_the_records_the_claim_did_not(engine_db: str) -> None:
    """PostgreSQL's claim read the record of a job message already (migration 0008):
    planning it runs no statement. A message of another layout (the same command,
    its keys in another order) is read as before, in one statement; so is every
    record on SQLite."""
    stores = stores_for(engine_db)
    hinted = tasks.add.enqueue(1, 2)
    messages = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    options = {
        "stores": stores,
        "namespace": NAMESPACE,
        "worker_id": "planner",
        "lease_ms": 30_000,
        "settings": later_settings(),
    }
    postgres = connections[engine_db].vendor == "postgresql"

    with CaptureQueriesContext(connections[engine_db]) as queries:
        start = plan_batch(messages, **options)

    assert [job.record.job_id for job in start.started] == [hinted.id]
    assert len(queries) == (0 if postgres else 1)
    start.commit()

    unhinted = tasks.add.enqueue(3, 4)
    stores.queue.ack("planner", [messages[0].sequence])
    [message] = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    stores.queue.ack("planner", [message.sequence])
    command = msgpack.unpackb(message.payload)
    reordered = msgpack.packb({"id": command["id"], "c": "job", "t": command["t"]})
    stores.queue.publish(NAMESPACE, "default", [reordered])
    [message] = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    assert message.record is None
    with CaptureQueriesContext(connections[engine_db]) as queries:
        start = plan_batch([message], **options)

    assert [job.record.job_id for job in start.started] == [unhinted.id]
    assert len(queries) == 1
