"""Django-side helpers the controller runs as child processes: ``python -m chaos.agent``.

Subcommands (settings :mod:`chaos.settings`, database from ``CHAOS_DATABASE``):

``enqueue``
    A steady-rate enqueuer. Each job is enqueued in its own ``transaction.atomic()``;
    only after the commit returned is ``{"job", "at"}`` appended (fsynced) to the
    ids file, so every id in that file is committed and an enqueue that raised is
    never counted. Database errors are retried with back-off (0.05 s doubling to
    2 s) until the time is up; at the end ``{"committed", "errors", "locked"}`` is
    written to the stats file (``locked``: "database is locked" errors that
    reached the enqueuer).
``poison``
    Enqueues the poison jobs of the poison cell, breaks two of them (a record that is
    not MessagePack, a task path that is not registered) and prints their ids as JSON.
``fan_in``
    Enqueues ``--parents`` ledger jobs and two fan-in children of all of them (``on``
    success and finish, ``api.after``), and a batch of ``--parents`` more with
    ``on_success`` and ``on_finish`` callbacks writing to ``--batch-lines``, in one
    transaction; after the commit, appends every ledger job's id to the ids file and
    prints the children's and the callbacks' ids as JSON.
``results``
    Reads ids files and writes, per id, the database's view of the job as JSON:
    ``get_result`` status for the load jobs, the stored record for poison jobs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import django


def _enqueue(options: argparse.Namespace) -> None:
    from django.db import DatabaseError, connection, transaction

    from chaos.tasks import append_line, ledger

    stats: dict[str, Any] = {"committed": 0, "errors": 0, "locked": 0}
    interval = 1.0 / options.rate
    deadline = time.monotonic() + options.seconds
    next_at = time.monotonic()
    backoff = 0.05
    while time.monotonic() < deadline:
        pause = next_at - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        try:
            with transaction.atomic():
                result = ledger.enqueue(options.ledger, options.task_seconds)
        except DatabaseError as error:
            stats["errors"] += 1
            stats["locked"] += "database is locked" in str(error)
            connection.close()
            time.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
            next_at = time.monotonic()
            continue
        append_line(options.ids, {"job": result.id})
        stats["committed"] += 1
        backoff = 0.05
        # Never catch up in a burst after a stall: the rate is a steady one.
        next_at = max(next_at + interval, time.monotonic() - interval)
    Path(options.stats).write_text(json.dumps(stats))


def _poison(options: argparse.Namespace) -> None:
    from django.db import transaction

    from chaos import tasks
    from later_django.core.keys import job_key
    from later_django.core.records import decode_record, encode_record
    from later_django.storage.stores import stores_for

    path = options.ledger
    with transaction.atomic():
        jobs = {
            "undecodable": tasks.ledger.enqueue(path),
            "unregistered": tasks.ledger.enqueue(path),
            "os_exit": tasks.exit_abruptly.using(queue_name="exit").enqueue(path),
            # On the single worker's queue: not in a process an os._exit kills.
            "non_json": tasks.return_non_json.using(queue_name="slow").enqueue(path),
            "sleeper": tasks.slow_first_attempt.using(queue_name="slow").enqueue(path, 600),
        }
    storage = stores_for("default")
    storage.kv.set(job_key("chaos", jobs["undecodable"].id), b"\xc1not-msgpack")
    key = job_key("chaos", jobs["unregistered"].id)
    record = decode_record(storage.kv.get(key))
    record.task_path = "chaos.tasks.no_such_task"
    storage.kv.set(key, encode_record(record))
    print(json.dumps({name: result.id for name, result in jobs.items()}))


def _fan_in(options: argparse.Namespace) -> None:
    from django.db import transaction

    from chaos.tasks import append_line, batch_callback, ledger
    from later_django.api import after, enqueue_many
    from later_django.batches import batch, callback

    calls = [((options.ledger, options.task_seconds), {})] * options.parents
    lines = options.batch_lines
    rules = {rule: callback(batch_callback, lines, rule) for rule in ("on_success", "on_finish")}
    with transaction.atomic():
        parents = enqueue_many(ledger, calls)
        children = {
            on: after(parents, ledger, options.ledger, on=on) for on in ("success", "finish")
        }
        with batch(**rules) as members:
            enqueue_many(ledger, calls)
    for job_id in [
        *(job.id for job in parents),
        *(c.id for c in children.values()),
        *members.members,
    ]:
        append_line(options.ids, {"job": job_id})
    callbacks = {rule: job.id for rule, job in members.callbacks.items()}
    named = {on: child.id for on, child in children.items()}
    print(json.dumps({**named, **callbacks, "batch": members.id}))


def _workflow(options: argparse.Namespace) -> None:
    """Prints the workflow's counts by stage and its state (``get_workflow``)."""
    from later_django.workflow import get_workflow

    state = get_workflow(options.id)
    print(json.dumps(None if state is None else {"counts": state.counts, "state": state.state}))


def _record_view(job_id: str) -> dict[str, Any]:
    from later_django.core.keys import job_key
    from later_django.core.records import decode_record
    from later_django.storage.stores import stores_for

    raw = stores_for("default").kv.get(job_key("chaos", job_id))
    if raw is None:
        return {"stage": None}
    record = decode_record(raw)
    errors = record.errors or []
    last = errors[-1] if errors else None
    return {
        "stage": record.stage,
        "attempts": len(record.worker_ids),
        "reason": record.reason,
        "error": last.exception_class_path if last else None,
        "detail": last.traceback.strip().splitlines()[-1] if last and last.traceback else None,
        # How often the job left ``waiting``: 1 for a fan-in child made ready once.
        "left_waiting": [stage for stage, _ in record.history].count("waiting"),
    }


def _results(options: argparse.Namespace) -> None:
    from chaos.tasks import ledger
    from later_django.compat.tasks import TaskResultDoesNotExist

    view: dict[str, Any] = {}
    for path in options.ids:
        for line in Path(path).read_text().splitlines() if Path(path).exists() else []:
            job = json.loads(line)["job"]
            try:
                view[job] = {"status": ledger.get_result(job).status.name}
            except TaskResultDoesNotExist:
                view[job] = {"status": None}
    for job in options.records:
        view[job] = {**view.get(job, {}), **_record_view(job)}
    Path(options.out).write_text(json.dumps(view))


def main(argv: list[str]) -> None:
    """Parses ``argv`` and runs one subcommand (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m chaos.agent")
    commands = parser.add_subparsers(dest="command", required=True)
    enqueue = commands.add_parser("enqueue")
    enqueue.add_argument("--ids", required=True)
    enqueue.add_argument("--ledger", required=True)
    enqueue.add_argument("--stats", required=True)
    enqueue.add_argument("--rate", type=float, required=True)
    enqueue.add_argument("--seconds", type=float, required=True)
    enqueue.add_argument("--task-seconds", type=float, default=0.0)
    poison = commands.add_parser("poison")
    poison.add_argument("--ledger", required=True)
    fan_in = commands.add_parser("fan_in")
    fan_in.add_argument("--ids", required=True)
    fan_in.add_argument("--ledger", required=True)
    fan_in.add_argument("--parents", type=int, required=True)
    fan_in.add_argument("--task-seconds", type=float, default=0.0)
    fan_in.add_argument("--batch-lines", required=True)
    workflow = commands.add_parser("workflow")
    workflow.add_argument("--id", required=True)
    results = commands.add_parser("results")
    results.add_argument("--out", required=True)
    results.add_argument("--ids", nargs="*", default=[])
    results.add_argument("--records", nargs="*", default=[])
    options = parser.parse_args(argv)
    django.setup()
    commands_run = {
        "enqueue": _enqueue,
        "poison": _poison,
        "fan_in": _fan_in,
        "workflow": _workflow,
        "results": _results,
    }
    commands_run[options.command](options)


if __name__ == "__main__":
    main(sys.argv[1:])
