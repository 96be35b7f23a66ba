"""Backlog scenarios of ``bench.py`` (later_django only, SQLite and PostgreSQL): the
drain and the enqueue beside a large backlog, each against the plain scenario
measured in the same invocation, round by round.

* ``drain_backlog``: ``--backlog`` (1,000,000) ready no-op jobs in queue ``default``;
  the two workers start on it and drain; the time runs from both workers being up
  (the jobs finished during start-up are left out) until ``--drain-jobs`` (20,000)
  more have finished: the rate over the head of the backlog.
* ``drain_other_queue``: the ``drain`` of ``--drain-jobs`` published to ``default``
  beside ``--backlog`` ready jobs in ``bench_unserved`` (a queue no worker serves),
  ``--backlog`` ready jobs in ``bench_paused`` (served, but paused with
  ``api.pause_queue``) and ``--backlog`` finished jobs kept (stage ``success``, their
  records and index rows retained for a day, as a real finish leaves them). Its
  workers, and those of its plain drain, run ``--queue default --queue bench_paused``.
* ``drain_delayed``: the ``drain`` beside ``--backlog`` delayed jobs in ``default``
  (``run_after`` one hour after the backlog was built).
* ``enqueue_backlog``: the ``enqueue`` scenario (single ``enqueue()`` each in its own
  transaction, interleaved with bare INSERT+COMMITs) with ``--backlog`` ready jobs in
  ``default``; no workers (``--enqueue-workers off`` for it and its plain run: idle
  workers would drain the backlog meanwhile).

Each backlog is built ONCE per invocation into a template (PostgreSQL: a database
``<name>_backlog_<kind>``, ``VACUUM ANALYZE``d after the build, as autovacuum would
have; SQLite: a migrated file, its WAL checkpointed) and copied for every run
(``CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY``; a file copy). Ready and delayed
jobs are written by ``api.enqueue_many`` (``--backlog-batch``, 10,000 per
transaction); finished jobs are written as a real finish leaves them (the record in
``later_storage`` with stage ``success``, its history and times and the unindexed
expiry; the index row in ``later_jobs_index`` with the retention's expiry; the stage
counters follow through the index's triggers), in bulk, without running them; the
per-minute metrics tables a worker also fills are left empty.

Every line carries ``of_plain``: the median backlog figure / the median plain figure,
and ``of_plain_runs``: the ratio of each round (plain, then backlog, ``--runs`` rounds).
Progress is read from the stage counters (``later_stage_counts``), never a COUNT.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

SCENARIOS = ("drain_backlog", "drain_other_queue", "drain_delayed", "enqueue_backlog")
UNSERVED, PAUSED = "bench_unserved", "bench_paused"
#: The driver that builds a template: ``build_backlog_<kind>``.
BUILD_PREFIX = "build_backlog_"


@dataclass(frozen=True)
class Scenario:
    template: str  # the backlog kind (one template per kind and invocation)
    plain: str  # the bench.py driver of the plain run
    driver: str  # the driver of the backlog run
    extra_env: dict[str, str] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)


_OTHER_ENV = {
    "BENCH_QUEUES": json.dumps(["default", PAUSED, UNSERVED]),
    "BENCH_WORKER_QUEUES": json.dumps(["default", PAUSED]),
}
SPECS = {
    "drain_backlog": Scenario("ready", "drain", "drain_backlog"),
    "drain_other_queue": Scenario("other", "drain", "drain", _OTHER_ENV),
    "drain_delayed": Scenario("delayed", "drain", "drain"),
    "enqueue_backlog": Scenario("ready", "enqueue", "enqueue", {}, {"enqueue_workers": "off"}),
}


def template_parts(kind: str, backlog: int) -> list[tuple[str, str, int]]:
    """What the template of ``kind`` holds: (what, queue, jobs) in build order."""
    if kind == "ready":
        return [("ready", "default", backlog)]
    if kind == "delayed":
        return [("delayed", "default", backlog)]
    return [
        ("ready", UNSERVED, backlog),
        ("paused", PAUSED, backlog),
        ("finished", "default", backlog),
    ]


# --- the drivers (in bench.py's driver subprocess, Django set up) ---


def driver(scenario: str, options: argparse.Namespace, log_dir: Path, bench: ModuleType) -> Any:
    if scenario.startswith(BUILD_PREFIX):
        return build(scenario.removeprefix(BUILD_PREFIX), options, bench.NAMESPACE)
    return run_drain_backlog(options, log_dir, bench)


def run_drain_backlog(options: argparse.Namespace, log_dir: Path, bench: ModuleType) -> Any:
    """The workers start on the ready backlog; timed from both being up until
    ``--drain-jobs`` more jobs have finished (stage counters)."""
    workers = bench.start_workers(bench.LATER, options, log_dir)
    try:
        ready_s = bench.wait_until_ready(bench.LATER, workers)
        before = bench.finished_count(bench.LATER)
        seconds, success, failed = bench.wait_finished(
            bench.LATER, options.drain_jobs, options.drain_timeout, before
        )
    finally:
        problems = bench.stop_workers(workers)
    return {
        **bench._drain_figures(options.drain_jobs, success, failed, seconds, 0.0, ready_s),
        "finished_before_timing": sum(before),
        "worker_problems": problems,
    }


def build(kind: str, options: argparse.Namespace, namespace: str) -> dict[str, Any]:
    """Fills the (migrated) template database of ``kind``; returns the seconds per part."""
    from django.db import connection

    seconds: dict[str, float] = {}
    for what, queue, jobs in template_parts(kind, options.backlog):
        started = time.perf_counter()
        if what == "finished":
            write_finished(namespace, queue, jobs, options.backlog_batch)
        else:
            enqueue(what, queue, jobs, options.backlog_batch)
        seconds[f"{what}:{queue}"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM ANALYZE")  # autovacuum is off on the bench's server
        else:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    seconds["vacuum_analyze" if connection.vendor == "postgresql" else "checkpoint"] = round(
        time.perf_counter() - started, 1
    )
    return {"kind": kind, "parts": template_parts(kind, options.backlog), "seconds": seconds}


def enqueue(what: str, queue: str, jobs: int, batch: int) -> None:
    """``jobs`` no-op jobs through ``api.enqueue_many``, ``batch`` per transaction:
    ready ones, delayed ones (``run_after`` an hour from now) or ready ones in a
    queue paused first (``api.pause_queue``)."""
    import datetime

    from django.db import transaction

    from bench.bench_project.tasks import noop
    from later_django import api

    task = noop.using(queue_name=queue)
    if what == "delayed":
        run_after = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
        task = task.using(run_after=run_after)
    if what == "paused":
        api.pause_queue(queue, by="bench backlog")
    call: tuple[tuple[()], dict[str, Any]] = ((), {})
    for first in range(0, jobs, batch):
        with transaction.atomic():
            api.enqueue_many(task, [call] * min(batch, jobs - first), ids_only=True)


def write_finished(namespace: str, queue: str, jobs: int, batch: int) -> None:
    """``jobs`` finished no-op jobs as a real run leaves them: record (stage
    ``success``, history enqueued -> running, started/finished times, expiry in
    ``date_expire_unindexed``) and index row (``success``, revision 2, the expiry of
    the success retention), finished over the hour before now; the stage counters
    follow through the index's triggers. No delivery row (a finish acks it)."""
    from django.db import connection, transaction

    from bench.bench_project.tasks import noop
    from later_django.conf import later_settings
    from later_django.core.keys import job_key
    from later_django.core.records import JobRecord, encode_record, new_job_ids

    keep_ms = later_settings().retention_seconds["success"] * 1000
    task_path = noop.module_path
    first_ms = int(time.time() * 1000) - 3_600_000
    worker = ["bench-backlog:1:finished"]
    postgres = connection.vendor == "postgresql"
    for first in range(0, jobs, batch):
        count = min(batch, jobs - first)
        records, rows = [], []
        for n, job_id in enumerate(new_job_ids(count), start=first):
            created = first_ms + n * 3_600_000 // jobs
            started, finished = created + 2, created + 3
            record = JobRecord(
                job_id=job_id,
                namespace=namespace,
                task_path=task_path,
                args=[],
                kwargs={},
                queue_name=queue,
                priority=0,
                backend="default",
                stage="success",
                stage_at_ms=finished,
                created_at_ms=created,
                history=[("enqueued", created), ("running", started)],
                ready_at_ms=created,
                worker_ids=worker,
                enqueued_at_ms=created,
                started_at_ms=started,
                finished_at_ms=finished,
                last_attempted_at_ms=started,
            )
            updated = finished + 2
            key = job_key(namespace, job_id)
            records.append((key, encode_record(record), created, updated, updated + keep_ms))
            expire = finished + keep_ms
            rows.append(
                (
                    namespace,
                    job_id,
                    task_path,
                    "success",
                    finished,
                    2,
                    created,
                    2,
                    "regular",
                    expire,
                )
            )
        storage_columns = "key, value, date_created, date_updated, date_expire_unindexed"
        index_columns = (
            "namespace, job_id, payload_type, stage, stage_date_ms, revision, created_at_ms,"
            " wait_ms, wait_mode, date_expire"
        )
        with transaction.atomic(), connection.cursor() as cursor:
            if postgres:  # COPY: one statement each, so one trigger call per batch
                raw = cursor.cursor
                with raw.copy(f"COPY later_storage ({storage_columns}) FROM STDIN") as copy:
                    for record_row in records:
                        copy.write_row(record_row)
                with raw.copy(f"COPY later_jobs_index ({index_columns}) FROM STDIN") as copy:
                    for index_row in rows:
                        copy.write_row(index_row)
            else:
                cursor.executemany(
                    f"INSERT INTO later_storage ({storage_columns}) VALUES (%s, %s, %s, %s, %s)",
                    records,
                )
                cursor.executemany(
                    f"INSERT INTO later_jobs_index ({index_columns})"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )


# --- the orchestrator ---


def run(
    scenarios: list[str],
    options: argparse.Namespace,
    directory: Path,
    emit: Callable[[dict[str, Any]], None],
    bench: ModuleType,
) -> None:
    """Builds each template once, then per scenario ``--runs`` rounds of (plain run on
    a fresh database, backlog run on a copy of the template); one line per scenario."""
    templates: dict[str, dict[str, Any]] = {}
    try:
        for scenario in scenarios:
            spec = SPECS[scenario]
            if spec.template not in templates:
                templates[spec.template] = build_template(spec, options, directory, bench)
            plain, backlog = [], []
            for run_ in range(options.runs):
                label = f"{scenario}-plain-{run_}"
                with bench.fresh_database(options.db, options, directory, label) as url:
                    bench.migrate(url, bench.LATER, spec.extra_env)
                    plain.append(
                        bench.drive(
                            bench.LATER,
                            spec.plain,
                            url,
                            options,
                            directory,
                            label,
                            spec.extra_env,
                            **spec.overrides,
                        )
                    )
                label = f"{scenario}-backlog-{run_}"
                template = templates[spec.template]
                with copied_database(options, directory, label, template, bench) as (url, copy_s):
                    result = bench.drive(
                        bench.LATER,
                        spec.driver,
                        url,
                        options,
                        directory,
                        label,
                        spec.extra_env,
                        **spec.overrides,
                    )
                result["copy_seconds"] = round(copy_s, 1)
                backlog.append(result)
                for line in [
                    *plain[-1].get("worker_problems", []),
                    *result.get("worker_problems", []),
                ]:
                    print(
                        f"[{scenario} round {run_ + 1}] worker log: {line}", file=bench.sys.stderr
                    )
            emit(figure(scenario, spec, plain, backlog, templates[spec.template], options))
    finally:
        for template in templates.values():
            drop_template(options, template, bench)


def build_template(
    spec: Scenario, options: argparse.Namespace, directory: Path, bench: ModuleType
) -> dict[str, Any]:
    """A migrated database holding the backlog of ``spec.template``: where it is and
    what building it took."""
    kind = spec.template
    started = time.perf_counter()
    if options.db == "sqlite":
        path = directory / f"backlog-{kind}.sqlite3"
        url = f"sqlite:///{path}"
        template = {"kind": kind, "path": path}
    else:
        admin, name = bench.postgres_admin(options.postgres_url)
        template_name = f"{name}_backlog_{kind}"
        with admin:
            admin.execute(f"DROP DATABASE IF EXISTS {quoted(template_name)} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {quoted(template_name)}")
        url = options.postgres_url.rsplit("/", 1)[0] + f"/{template_name}"
        template = {"kind": kind, "name": template_name}
    bench.migrate(url, bench.LATER, spec.extra_env)
    label = f"{BUILD_PREFIX}{kind}"
    built = bench.drive(bench.LATER, label, url, options, directory, label, _OTHER_ENV)
    template["build"] = {**built, "total_seconds": round(time.perf_counter() - started, 1)}
    print(
        f"backlog template {kind!r} built: {json.dumps(template['build'])}", file=bench.sys.stderr
    )
    return template


@contextlib.contextmanager
def copied_database(
    options: argparse.Namespace,
    directory: Path,
    label: str,
    template: dict[str, Any],
    bench: ModuleType,
) -> Iterator[tuple[str, float]]:
    """Yields (URL, seconds the copy took) of a copy of ``template``, removed afterwards."""
    started = time.perf_counter()
    if options.db == "sqlite":
        path = directory / f"{label}.sqlite3"
        shutil.copyfile(template["path"], path)  # its WAL was checkpointed (TRUNCATE)
        # On disk before the run: else the run's first checkpoint (an fsync of the
        # file) writes back the whole fresh copy and the run pays for it (0.5 GB at
        # 1,000,000 jobs: +65 µs an enqueue over 3,000, measured).
        with open(path, "rb+") as copy:
            os.fsync(copy.fileno())
        try:
            yield f"sqlite:///{path}", time.perf_counter() - started
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    admin, name = bench.postgres_admin(options.postgres_url)
    with admin:
        admin.execute(f"DROP DATABASE IF EXISTS {quoted(name)} WITH (FORCE)")
        admin.execute(
            f"CREATE DATABASE {quoted(name)} TEMPLATE {quoted(template['name'])} STRATEGY FILE_COPY"
        )
        try:
            yield options.postgres_url, time.perf_counter() - started
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {quoted(name)} WITH (FORCE)")


def drop_template(options: argparse.Namespace, template: dict[str, Any], bench: ModuleType) -> None:
    if options.db == "sqlite":
        Path(template["path"]).unlink(missing_ok=True)
        return
    admin, _ = bench.postgres_admin(options.postgres_url)
    with admin:
        admin.execute(f"DROP DATABASE IF EXISTS {quoted(template['name'])} WITH (FORCE)")


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def figure(
    scenario: str,
    spec: Scenario,
    plain: list[dict[str, Any]],
    backlog: list[dict[str, Any]],
    template: dict[str, Any],
    options: argparse.Namespace,
) -> dict[str, Any]:
    """One JSON line: the backlog rate, the plain rate of the same rounds, ``of_plain``."""
    values = [result["value"] for result in backlog]
    plain_values = [result["value"] for result in plain]
    value, plain_value = statistics.median(values), statistics.median(plain_values)
    line: dict[str, Any] = {
        "scenario": scenario,
        "db": options.db,
        "system": "later_django",
        "value": round(value, 1),
        "unit": "jobs/s",
        "runs": [round(v, 1) for v in values],
        "of_plain": round(value / plain_value, 3),
        "of_plain_runs": [round(b / p, 3) for b, p in zip(values, plain_values, strict=True)],
        "plain": round(plain_value, 1),
        "plain_runs": [round(v, 1) for v in plain_values],
        "plain_scenario": spec.plain,
        "backlog": [
            {"what": what, "queue": queue, "jobs": jobs}
            for what, queue, jobs in template_parts(spec.template, options.backlog)
        ],
        "build_seconds": template["build"]["total_seconds"],
        "copy_seconds": [result["copy_seconds"] for result in backlog],
        "higher_is_better": True,
        "worker_problems": sum(len(r.get("worker_problems", [])) for r in plain + backlog),
    }
    if spec.plain == "enqueue":
        line["jobs"] = options.enqueue_jobs
        line["enqueue_workers"] = "off"
        for key in ("ms_per_job", "over_bare_ms", "bare_insert_commit_ms"):
            line[key] = round(statistics.median(r[key] for r in backlog), 3)
            line[f"plain_{key}"] = round(statistics.median(r[key] for r in plain), 3)
        return line
    queues = json.loads(spec.extra_env.get("BENCH_WORKER_QUEUES", "[]"))
    line["workers"] = f"later_worker --processes 2 --concurrency {options.concurrency}" + "".join(
        f" --queue {name}" for name in queues
    )
    line["jobs"] = options.drain_jobs
    line["completed"] = [result["completed"] for result in backlog]
    line["seconds"] = [result["seconds"] for result in backlog]
    line["timed_out"] = any(result["timed_out"] for result in backlog)
    line["failed"] = sum(result["failed"] for result in backlog)
    line["timing"] = (
        "from both workers up (they start on the backlog) until --drain-jobs more finished"
        if spec.driver == "drain_backlog"
        else "from the commit of the published jobs to the last finished; workers idle before"
    )
    if spec.driver == "drain_backlog":
        line["finished_before_timing"] = [r["finished_before_timing"] for r in backlog]
    return line
