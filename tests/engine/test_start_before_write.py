"""A claimed job goes to its thread only once its start is written (``JobLoop``).

The start (record ``running`` with the attempt, index row, execution lease) commits
before the task's first line: a job that kills its process at once leaves its
attempt behind, so a poison job is counted, not delivered again and again as
attempt 1. These tests hold that write back, or make it fail, through Django's
``execute_wrapper`` on the worker's connection (the worker's main loop runs on the
test's thread here), and check that the task had not begun and what the database
ends with. The planning half (``plan_batch``) writes nothing.
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
from later_django.engine.execution import plan_batch
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, row_counts, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: How long the held start write waits to see whether the task begins (it must not).
TASK_START_SECONDS = 0.5
START_WRITE = "INSERT INTO later_job_execution"


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


def test_a_job_starts_on_its_thread_only_after_its_start_write(
    engine_db: str, tmp_path: Path
) -> None:
    hold, job_id, started = _run_held(engine_db, tmp_path, fail=False)

    assert hold.task_had_started is False
    _assert_ran_once_and_succeeded(engine_db, job_id, started)


def test_a_failed_start_write_hands_the_batch_back_unstarted(
    engine_db: str, tmp_path: Path
) -> None:
    """Nothing of the batch ran: it is claimed again, started and run once, with
    one attempt."""
    hold, job_id, started = _run_held(engine_db, tmp_path, fail=True)

    assert hold.task_had_started is False
    _assert_ran_once_and_succeeded(engine_db, job_id, started)


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
