"""The statements of a worker's batch — claim, start, finish — are the same for one
job as for sixteen: what a job costs the database is that fixed list divided by
the batch. A new statement on this path (a trigger's work does not show here, a
round trip does) must change this pin on purpose; see docs/benchmarks.md,
"Statements per job".

The engine's calls are the ones ``JobLoop`` makes for a batch of queue jobs: the
claim, ``plan_batch`` then ``commit`` (on PostgreSQL written while the jobs run,
decision 112; the statement is the same), and ``finish_and_continue``.
"""

from __future__ import annotations

import re

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from later_django.api import after
from later_django.conf import later_settings
from later_django.engine import metrics
from later_django.engine.execution.finish import finish_and_continue
from later_django.engine.execution.start import plan_batch
from later_django.engine.execution.values import Outcome
from later_django.storage.stores import stores_for
from later_django.worker.task_calls import run_job
from later_django.workflow import Workflow
from tests.engine import result_tasks, tasks
from tests.engine.support import NAMESPACE, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: (pattern, label): the first pattern found in a statement names it.
KINDS = (
    (r"^\s*BEGIN IMMEDIATE", "BEGIN IMMEDIATE"),
    (r"^\s*BEGIN", "BEGIN"),
    (r"^\s*COMMIT", "COMMIT"),
    (r"later_claim_counted|UPDATE later_delivery_queue\s+SET lease_owner", "claim"),
    (r"^\s*WITH p0 AS", "one combined write"),
    (r"^\s*SELECT range_key|^\s*WITH found AS", "read continuations"),
    (r"SET counter_value = counter_value -", "decrement counters"),
    (r"^\s*DELETE FROM later_storage_range\b", "clear ranges"),
    (r"^\s*DELETE FROM later_storage\b", "delete keys"),
    (r"^\s*DELETE FROM later_jobs_index\b", "delete index rows"),
    (r"^\s*INSERT INTO later_delivery_queue\b", "publish"),
    (r"^\s*SELECT key, value FROM later_storage\b", "read records"),
    (r"^\s*DELETE FROM later_delivery_queue", "ack messages"),
    (r"^\s*INSERT INTO later_storage\b.*date_updated, date_expire\) ", "add to counters"),
    (r"^\s*INSERT INTO later_storage\b", "write records"),
    (r"^\s*INSERT INTO later_jobs_index\b", "write index rows"),
    (r"^\s*INSERT INTO later_job_execution\b", "take execution leases"),
    (r"^\s*DELETE FROM later_job_execution\b", "release execution leases"),
)

#: vendor -> step -> the statements of one batch, in order.
PINNED = {
    "postgresql": {
        "claim": ["claim"],
        "start": ["one combined write"],
        "finish": ["BEGIN", "one combined write", "read continuations", "COMMIT"],
    },
    "sqlite": {
        "claim": ["BEGIN IMMEDIATE", "claim", "COMMIT"],
        "start": [
            "read records",
            "BEGIN IMMEDIATE",
            "write records",
            "write index rows",
            "take execution leases",
            "COMMIT",
        ],
        "finish": [
            "BEGIN IMMEDIATE",
            "ack messages",
            "write records",
            "write index rows",
            "release execution leases",
            "read continuations",
            "COMMIT",
        ],
    },
}


def kind(sql: str) -> str:
    """The label of ``sql`` in :data:`KINDS` (the statement's start when none fits)."""
    for pattern, label in KINDS:
        if re.search(pattern, sql):
            return label
    return sql[:80]


def batch_statements(alias: str, jobs: int, *, in_workflow: bool = False) -> dict[str, list[str]]:
    """Enqueues ``jobs`` jobs (as steps of one workflow when ``in_workflow``), then
    claims, starts and finishes them as one batch; each step's statements, labelled."""
    stores = stores_for(alias)
    worker = {
        "stores": stores,
        "namespace": NAMESPACE,
        "worker_id": "w1",
        "settings": later_settings(),
    }
    if in_workflow:
        flow = Workflow()
        for n in range(jobs):
            flow.add(f"step-{n}", tasks.add, n, n)
        flow.enqueue()
    else:
        for n in range(jobs):
            tasks.add.enqueue(n, n)
    connection = connections[alias]
    steps: dict[str, list[str]] = {}
    # The metrics flush is due once a second whichever call comes then; it is not
    # part of a batch.
    metrics.accumulator.take()
    with CaptureQueriesContext(connection) as claim:
        messages = stores.queue.claim(NAMESPACE, ["default"], "w1", 30_000, batch_size=jobs)
    with CaptureQueriesContext(connection) as start:
        batch = plan_batch(messages, lease_ms=30_000, **worker)
        batch.commit()
    assert len(batch.started) == jobs
    metrics.accumulator.take()
    with CaptureQueriesContext(connection) as finish:
        records, _ = finish_and_continue(
            [Outcome(job, return_value=1) for job in batch.started], **worker
        )
    assert {record.stage for record in records} == {"success"}
    for step, captured in (("claim", claim), ("start", start), ("finish", finish)):
        steps[step] = [kind(query["sql"]) for query in captured.captured_queries]
    return steps


@pytest.mark.parametrize("jobs", [1, 16])
def test_a_batch_of_queue_jobs_is_a_fixed_list_of_statements(engine_db: str, jobs: int) -> None:
    vendor = connections[engine_db].vendor

    assert batch_statements(engine_db, jobs) == PINNED[vendor]


#: A workflow's jobs also move its counts: on PostgreSQL inside the combined write, on
#: SQLite one statement more at the start and at the finish (before the COMMIT's
#: neighbours: the counters are written with the records' table).
WORKFLOW_PINNED = {
    "postgresql": PINNED["postgresql"],
    "sqlite": {
        **PINNED["sqlite"],
        "start": [
            "read records",
            "BEGIN IMMEDIATE",
            "write records",
            "add to counters",
            "write index rows",
            "take execution leases",
            "COMMIT",
        ],
        "finish": [
            "BEGIN IMMEDIATE",
            "ack messages",
            "write records",
            "add to counters",
            "write index rows",
            "release execution leases",
            "read continuations",
            "COMMIT",
        ],
    },
}


@pytest.mark.parametrize("jobs", [1, 16])
def test_a_batch_of_a_workflows_jobs_adds_at_most_one_statement_for_its_counts(
    engine_db: str, jobs: int
) -> None:
    vendor = connections[engine_db].vendor

    assert batch_statements(engine_db, jobs, in_workflow=True) == WORKFLOW_PINNED[vendor]


#: vendor -> the statements of a parent's finish that has a fan-in child (``api.after``):
#: while other parents are unfinished, and when it is the last.
FAN_IN_PINNED = {
    "postgresql": {
        # The continuations' read also decrements the fan-in children's counts
        # (decision 210); the children ranges it found are deleted by a statement of
        # their own, planned at each run (decision 211).
        "not last": [
            "BEGIN",
            "one combined write",
            "read continuations",
            "clear ranges",
            "COMMIT",
        ],
        "last": [
            "BEGIN",
            "one combined write",
            "read continuations",
            "clear ranges",
            "read records",  # the child, locked
            "one combined write",  # the child ready, its counter gone
            "COMMIT",
        ],
    },
    "sqlite": {
        "not last": [
            "BEGIN IMMEDIATE",
            "ack messages",
            "write records",
            "write index rows",
            "release execution leases",
            "read continuations",
            "clear ranges",
            "decrement counters",
            "COMMIT",
        ],
        "last": [
            "BEGIN IMMEDIATE",
            "ack messages",
            "write records",
            "write index rows",
            "release execution leases",
            "read continuations",
            "clear ranges",
            "decrement counters",
            "read records",
            "write records",
            "delete keys",
            "delete index rows",
            "publish",
            "COMMIT",
        ],
    },
}


def finish_statements(alias: str, parents: list[str]) -> list[str]:
    """Claims, starts and finishes the oldest ready job (one of ``parents``); the
    finish's statements, labelled."""
    stores = stores_for(alias)
    worker = {
        "stores": stores,
        "namespace": NAMESPACE,
        "worker_id": "w1",
        "settings": later_settings(),
    }
    messages = stores.queue.claim(NAMESPACE, ["default"], "w1", 30_000, batch_size=1)
    batch = plan_batch(messages, lease_ms=30_000, **worker)
    batch.commit()
    assert [job.record.job_id for job in batch.started] in ([parents[0]], [parents[1]])
    metrics.accumulator.take()
    with CaptureQueriesContext(connections[alias]) as finish:
        finish_and_continue([Outcome(job, return_value=1) for job in batch.started], **worker)
    return [kind(query["sql"]) for query in finish.captured_queries]


def test_a_parents_finish_with_a_fan_in_child_is_a_fixed_list_of_statements(
    engine_db: str,
) -> None:
    """The fan-in costs a finish one statement on PostgreSQL (the parent's children
    range emptied; the continuations' read decrements the counter) while other
    parents are unfinished; the last parent's finish also reads and moves the child. A finish
    without a fan-in child is unchanged (the pins above)."""
    parents = [tasks.add.enqueue(n, n).id for n in range(2)]
    after(parents, tasks.add, 0, 0)
    steps = {
        "not last": finish_statements(engine_db, parents),
        "last": finish_statements(engine_db, parents),
    }

    assert steps == FAN_IN_PINNED[connections[engine_db].vendor]


def child_statements(alias: str) -> dict[str, list[str]]:
    """A fan-in child of two finished parents claimed, started, run (its task reads
    ``context.parent_results``) and finished as one batch; each step's statements."""
    stores = stores_for(alias)
    worker = {
        "stores": stores,
        "namespace": NAMESPACE,
        "worker_id": "w1",
        "settings": later_settings(),
    }
    parents = [result_tasks.number.using(queue_name="emails").enqueue(n).id for n in (1, 2)]
    child = after(parents, result_tasks.parent_results)
    run_burst(["emails"])
    connection = connections[alias]
    metrics.accumulator.take()
    messages = stores.queue.claim(NAMESPACE, ["default"], "w1", 30_000, batch_size=1)
    with CaptureQueriesContext(connection) as start:
        batch = plan_batch(messages, lease_ms=30_000, **worker)
        batch.commit()
    [job] = batch.started
    assert job.record.job_id == child.id
    with CaptureQueriesContext(connection) as run:
        outcome = run_job(job, manage_connections=False)
    assert outcome.return_value == [[parents[0], 1], [parents[1], 2]]
    metrics.accumulator.take()
    with CaptureQueriesContext(connection) as finish:
        finish_and_continue([outcome], **worker)
    return {
        step: [kind(query["sql"]) for query in captured.captured_queries]
        for step, captured in (("start", start), ("run", run), ("finish", finish))
    }


#: vendor -> the statements of a child's start (as any job's: the pins above), of its
#: task reading ``context.parent_results`` (one read of every parent's record), and
#: of its finish (as any job's, plus the decrement of its parents' dependents counters,
#: and their deletion once at 0).
CHILD_PINNED = {
    "postgresql": {
        "start": PINNED["postgresql"]["start"],
        "run": ["read records"],
        "finish": [
            "BEGIN",
            "one combined write",
            "read continuations",
            "decrement counters",
            "one combined write",  # the counters left at 0 deleted
            "COMMIT",
        ],
    },
    "sqlite": {
        "start": PINNED["sqlite"]["start"],
        "run": ["read records"],
        "finish": [
            *PINNED["sqlite"]["finish"][:-1],
            "decrement counters",
            "delete keys",
            "COMMIT",
        ],
    },
}


def test_a_childs_start_reading_its_parents_results_is_a_fixed_list_of_statements(
    engine_db: str,
) -> None:
    """Reading the parents' results costs the child one statement, on first use, and
    its start none; its finish lets the parents go with one more statement (plus the
    counters' deletion). A job without parents pays none of it (the pins above)."""
    assert child_statements(engine_db) == CHILD_PINNED[connections[engine_db].vendor]
