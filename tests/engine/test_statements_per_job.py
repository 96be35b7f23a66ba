"""The statements of a worker's batch — claim, start, finish — are the same for one
job as for sixteen: what a job costs the database is that fixed list divided by
the batch. A new statement on this path (a trigger's work does not show here, a
round trip does) must change this pin on purpose; see docs/benchmarks.md,
"Statements per job".

The engine's calls are the ones ``JobLoop`` makes for a batch of queue jobs: the
claim, ``plan_batch`` then ``commit`` (on PostgreSQL and MySQL written while the
jobs run, decision 112; the statements are the same), and ``finish_and_continue``.

On MySQL/MariaDB the statements Django logs are not all the round trips: a
transaction's ``BEGIN`` is ``SET autocommit=0`` and after its ``COMMIT`` Django turns
autocommit on again, a round trip Django does not log. The pins there also check
what the server counted (the session's ``Questions``): the statements listed and
one more per ``COMMIT`` (:func:`server_statements`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

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


def deleting(table: str) -> str:
    """A ``DELETE`` from ``table``: ``DELETE FROM table``, or MySQL's multi-table
    ``DELETE alias FROM JSON_TABLE(...) STRAIGHT_JOIN table AS alias``."""
    return rf"^\s*DELETE (\w+ )?FROM (.* )?{table}\b"


#: (pattern, label): the first pattern found in a statement names it.
KINDS = (
    (r"^\s*BEGIN IMMEDIATE", "BEGIN IMMEDIATE"),
    (r"^\s*BEGIN", "BEGIN"),
    (r"^\s*COMMIT", "COMMIT"),
    (r"later_claim_counted|UPDATE later_delivery_queue\s+SET lease_owner", "claim"),
    # MySQL's claim in steps: each queue's head locked, then the chosen ones taken.
    (r"^\s*\(?SELECT sequence, .* FOR UPDATE SKIP LOCKED", "lock queue heads"),
    (r"^\s*UPDATE JSON_TABLE\(.* later_delivery_queue AS q .*SET q\.lease_owner = '", "claim"),
    (r"^\s*WITH p0 AS", "one combined write"),
    (r"^\s*SELECT range_key|^\s*WITH found AS", "read continuations"),
    (r"SET (s\.)?counter_value = (s\.)?counter_value -", "decrement counters"),
    # MySQL: what the decrement left (it has no RETURNING).
    (r"^\s*SELECT `key`, counter_value FROM later_storage\b", "read decremented counters"),
    (deleting("later_storage_range"), "clear ranges"),
    (deleting("later_storage"), "delete keys"),
    (deleting("later_jobs_index"), "delete index rows"),
    (r"^\s*INSERT INTO later_delivery_queue\b", "publish"),
    (r"^\s*SELECT (s\.)?`?key`?, (s\.)?value FROM (.* )?later_storage\b", "read records"),
    (deleting("later_delivery_queue"), "ack messages"),
    (r"^\s*INSERT INTO later_storage\b.*date_updated, date_expire\) ", "add to counters"),
    (r"^\s*INSERT INTO later_storage\b", "write records"),
    (r"^\s*INSERT INTO later_jobs_index\b", "write index rows"),
    (r"^\s*INSERT INTO later_job_execution\b", "take execution leases"),
    (deleting("later_job_execution"), "release execution leases"),
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
    # SQLite's, but the claim in two statements (no UPDATE ... RETURNING; the claim
    # must lock the heads it chooses) and in a transaction of its own.
    "mysql": {
        "claim": ["BEGIN", "lock queue heads", "claim", "COMMIT"],
        "start": [
            "read records",
            "BEGIN",
            "write records",
            "write index rows",
            "take execution leases",
            "COMMIT",
        ],
        "finish": [
            "BEGIN",
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


def server_statements(logged: list[str]) -> int:
    """The round trips behind ``logged`` (Django's log of a step) on MySQL/MariaDB:
    each statement, and after each ``COMMIT`` the ``SET autocommit=1`` Django does
    not log."""
    return len(logged) + logged.count("COMMIT")


def questions(alias: str) -> int:
    """The statements the MySQL/MariaDB server counted for this session so far, this
    one included."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Questions'")
        return int(cursor.fetchone()[1])


def warmed_up(alias: str) -> None:
    """What the MySQL driver asks the server once in its life (``max_allowed_packet``
    for a batch's rows, the auto-increment mode for a publish's ids), asked now:
    not part of any batch."""
    driver = stores_for(alias).driver
    if driver.vendor == "mysql":
        driver.packet_limit()  # type: ignore[attr-defined]
        driver.auto_increment()  # type: ignore[attr-defined]


@contextmanager
def captured_step(alias: str) -> Iterator[CaptureQueriesContext]:
    """Django's log of the statements run inside; on MySQL/MariaDB also checks that the
    server ran as many as :func:`server_statements` says (the ``SHOW`` that reads the
    count after is one more)."""
    connection = connections[alias]
    mysql = connection.vendor == "mysql"
    before = questions(alias) if mysql else 0
    with CaptureQueriesContext(connection) as captured:
        yield captured
    if mysql:
        logged = [kind(query["sql"]) for query in captured.captured_queries]
        assert questions(alias) - before - 1 == server_statements(logged), logged


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
    steps: dict[str, list[str]] = {}
    warmed_up(alias)
    # The metrics flush is due once a second whichever call comes then; it is not
    # part of a batch.
    metrics.accumulator.take()
    with captured_step(alias) as claim:
        messages = stores.queue.claim(NAMESPACE, ["default"], "w1", 30_000, batch_size=jobs)
    with captured_step(alias) as start:
        batch = plan_batch(messages, lease_ms=30_000, **worker)
        batch.commit()
    assert len(batch.started) == jobs
    metrics.accumulator.take()
    with captured_step(alias) as finish:
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
    # As SQLite: the counters' upsert after the records'.
    "mysql": {
        **PINNED["mysql"],
        "start": [
            "read records",
            "BEGIN",
            "write records",
            "add to counters",
            "write index rows",
            "take execution leases",
            "COMMIT",
        ],
        "finish": [
            "BEGIN",
            "ack messages",
            "write records",
            "add to counters",
            "write index rows",
            "release execution leases",
            "read continuations",
            "COMMIT",
        ],
    },
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
    # SQLite's, but the decrement is an UPDATE and a read of what it left (no
    # RETURNING), in the finish's transaction.
    "mysql": {
        "not last": [
            "BEGIN",
            "ack messages",
            "write records",
            "write index rows",
            "release execution leases",
            "read continuations",
            "clear ranges",
            "decrement counters",
            "read decremented counters",
            "COMMIT",
        ],
        "last": [
            "BEGIN",
            "ack messages",
            "write records",
            "write index rows",
            "release execution leases",
            "read continuations",
            "clear ranges",
            "decrement counters",
            "read decremented counters",
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
    warmed_up(alias)
    metrics.accumulator.take()
    with captured_step(alias) as finish:
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
    warmed_up(alias)
    metrics.accumulator.take()
    messages = stores.queue.claim(NAMESPACE, ["default"], "w1", 30_000, batch_size=1)
    with captured_step(alias) as start:
        batch = plan_batch(messages, lease_ms=30_000, **worker)
        batch.commit()
    [job] = batch.started
    assert job.record.job_id == child.id
    with captured_step(alias) as run:
        outcome = run_job(job, manage_connections=False)
    assert outcome.return_value == [[parents[0], 1], [parents[1], 2]]
    metrics.accumulator.take()
    with captured_step(alias) as finish:
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
    "mysql": {
        "start": PINNED["mysql"]["start"],
        "run": ["read records"],
        "finish": [
            *PINNED["mysql"]["finish"][:-1],
            "decrement counters",
            "read decremented counters",
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
