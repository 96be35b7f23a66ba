"""The ``fan_in`` and ``batch`` scenarios of ``bench.py`` (later_django only, SQLite and
PostgreSQL): ``--drain-jobs`` parents and one child waiting for all of them
(``api.after``); ``--drain-jobs`` members of a batch (``later_django.batches``) with an
``on_success`` callback.

On the two workers (``later_worker --processes 2``), started and idle, each run drains
``--drain-jobs`` plain no-op jobs (one committed ``enqueue_many``), then twice the
same number of no-op parents enqueued with their fan-in child in one transaction,
then the plain jobs again (ABBA, so that a drifting load weighs on both kinds).
Times come from the jobs' records (epoch ms, one clock):

* ``ready_ms``: the child's ``ready_at`` - the last parent's ``finished_at``: how long
  after the last parent's finish the child became ready (the same transaction, so
  ~0 by construction; a design that polls or reconciles would show its period).
* ``started_ms``: the child's ``started_at`` - the last parent's ``finished_at``: the
  above plus the commit, the wake-up and a claim.
* ``of_drain``: the parents' drain rate over the plain drain's rate in the same run
  (each: jobs / (the last one's ``finished_at`` - the enqueue's commit)).
* ``after_seconds``: the ``after()`` call itself (inside the parents' transaction).

``batch`` measures the same with the batch's callback job as the child:
``callback_ms`` (the value) is its ``ready_at`` - the last member's ``finished_at``,
``of_drain`` the members' rate over the plain drain's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from types import ModuleType
from typing import Any

#: Records read per statement when the figures are read back.
READ_BATCH = 5_000


def _records(job_ids: list[str]) -> list[Any]:
    """The decoded records of ``job_ids`` (the bench's namespace, ``default`` alias)."""
    from later_django.core.keys import job_key
    from later_django.core.records import decode_record
    from later_django.storage.stores import stores_for

    kv = stores_for("default").kv
    records = []
    for first in range(0, len(job_ids), READ_BATCH):
        keys = [job_key("bench", job_id) for job_id in job_ids[first : first + READ_BATCH]]
        records += [decode_record(raw) for raw in kv.get_many(keys).values()]
    return records


def _enqueue(jobs: int, kind: str) -> tuple[list[str], Any, float]:
    """``jobs`` no-op jobs in one transaction, and the child ``kind`` asks for (``after``
    of all of them, or a batch's callback; none for a plain drain): (ids, child, seconds
    the child's enqueue took)."""
    from django.db import transaction

    from bench.bench_project.tasks import batch_done, noop
    from later_django.api import after, enqueue_many
    from later_django.batches import batch, callback

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [((), {})] * jobs
    with transaction.atomic():
        if kind == "batch":
            with batch(on_success=callback(batch_done)) as members:
                ids = enqueue_many(noop, calls, ids_only=True)
                started = time.perf_counter()
            child_s = time.perf_counter() - started
            return ids, members.callbacks["on_success"], child_s
        ids = enqueue_many(noop, calls, ids_only=True)
        started = time.perf_counter()
        child = after(ids, noop) if kind == "fan_in" else None
        return ids, child, time.perf_counter() - started


def _drain(bench: ModuleType, jobs: int, timeout: float, kind: str) -> dict[str, Any]:
    """Enqueues ``jobs`` no-op jobs (and the child ``kind`` asks for) in one transaction
    and waits until they (and the child) have finished."""
    before = bench.finished_count(bench.LATER)
    ids, child, after_s = _enqueue(jobs, kind)
    committed_ms = time.time() * 1000
    expected = jobs + (0 if child is None else 1)
    _seconds, success, failed = bench.wait_finished(bench.LATER, expected, timeout, before)
    parents = _records(ids)
    last_finish = max(record.finished_at_ms or 0 for record in parents)
    figures: dict[str, Any] = {
        "jobs": jobs,
        "completed": success + failed,
        "failed": failed,
        "rate": jobs / max((last_finish - committed_ms) / 1000, 1e-6),
        "after_seconds": after_s,
    }
    if child is not None:
        (record,) = _records([child.id])
        figures["child_stage"] = record.stage
        figures["ready_ms"] = (record.ready_at_ms or 0) - last_finish
        figures["started_ms"] = (record.started_at_ms or 0) - last_finish
    return figures


def run(
    options: argparse.Namespace, log_dir: Path, bench: ModuleType, kind: str = "fan_in"
) -> dict[str, Any]:
    """The driver: on the same idle workers, plain drain, ``kind``, ``kind``, plain drain
    (ABBA: a load that drifts during the run weighs on both alike), each of
    ``--drain-jobs``; rates summed per kind, the child's figures the worst of two."""
    workers = bench.start_workers(bench.LATER, options, log_dir)
    try:
        ready_s = bench.wait_until_ready(bench.LATER, workers)
        order = ("plain", kind, kind, "plain")
        drains = [_drain(bench, options.drain_jobs, options.drain_timeout, k) for k in order]
    finally:
        problems = bench.stop_workers(workers)
    plain = [drain for drain, k in zip(drains, order, strict=True) if k == "plain"]
    fanned = [drain for drain, k in zip(drains, order, strict=True) if k != "plain"]
    return {
        "value": max(drain["ready_ms"] for drain in fanned),
        "ready_ms": max(drain["ready_ms"] for drain in fanned),
        # batch: the child is the callback's job (figures() names the value so).
        "callback_ms": max(drain["ready_ms"] for drain in fanned),
        "started_ms": max(drain["started_ms"] for drain in fanned),
        "child_stage": "/".join(drain["child_stage"] for drain in fanned),
        "of_drain": sum(d["rate"] for d in fanned) / sum(d["rate"] for d in plain),
        "parents_rate": sum(d["rate"] for d in fanned) / len(fanned),
        "after_seconds": max(drain["after_seconds"] for drain in fanned),
        "plain_rate": sum(d["rate"] for d in plain) / len(plain),
        "jobs": options.drain_jobs,
        "completed": sum(drain["completed"] for drain in fanned),
        "failed": sum(drain["failed"] for drain in drains),
        "worker_start_seconds": round(ready_s, 3),
        "worker_problems": problems,
    }


def figures(
    results: list[dict[str, Any]], line: Any, scenario: str = "fan_in"
) -> list[dict[str, Any]]:
    """The scenario's JSON line: ``ready_ms`` (``batch``: ``callback_ms``; the value),
    ``of_drain`` and the rest, medians over the runs with each run's values beside them."""
    import statistics

    def median(key: str) -> float:
        return round(statistics.median(result[key] for result in results), 3)

    value = "callback_ms" if scenario == "batch" else "ready_ms"
    return [
        line(
            scenario,
            value,
            "ms",
            False,
            jobs=results[0]["jobs"],
            **{value: median("ready_ms")},
            started_ms=median("started_ms"),
            of_drain=median("of_drain"),
            of_drain_runs=[round(result["of_drain"], 3) for result in results],
            parents_rate=median("parents_rate"),
            after_seconds=median("after_seconds"),
            plain_rate=median("plain_rate"),
            child_stage=[result["child_stage"] for result in results],
            failed=sum(result["failed"] for result in results),
            measured="ready_ms: the child's ready_at - the last parent's finished_at "
            "(records); of_drain: the parents' rate / a plain drain's, same workers and run",
            worker_problems=sum(len(result["worker_problems"]) for result in results),
        )
    ]
