"""Bloat benchmark (PostgreSQL): dead tuples per job, peak dead tuples, size over time.

Two modes, both with real ``later_worker --processes 2 --concurrency 16`` processes
on the ``bench/bench_project`` settings (``BENCH_SYSTEM=later_django``):

* ``--quick``: on ``--postgres-url`` (any server, also the main one: the database
  of the URL is dropped and created for the run and dropped at the end) or, without
  a URL, on a throwaway cluster. ``--jobs`` (5,000) no-op jobs are drained
  (enqueued in batches of 500 at once, or with ``--quick-rate R`` at R a second
  in batches of ``--batch``); the statistics of ``pg_stat_user_tables`` are
  read before the jobs and after the workers stopped (a backend flushes its
  table statistics when it goes idle or exits; the read waits
  ``STATS_FLUSH_SECONDS`` after the stop), so every figure is an exact delta:
  the churn per job of every ``later_*`` table.
* the full run (default): a throwaway cluster (``chaos.cluster``: Debian's
  defaults, autovacuum on; ``--naptime`` overrides ``autovacuum_naptime``), jobs
  enqueued at a steady ``--rate`` (200/s) for ``--minutes`` (10) in transactions
  of ``--batch`` (10) jobs, finished records kept ``--retention-seconds`` (60) so
  the sweep deletes them and the tables can reach a steady state; every
  ``--sample-seconds`` (10) one JSON line per sample (per ``later_*`` table:
  n_live_tup, n_dead_tup, n_tup_ins/upd/hot_upd/del, autovacuum_count,
  pg_total_relation_size; ``published``/``acked``: delivery rows inserted and
  deleted so far, one per job), then a summary line. Jobs done are counted by
  delivery rows (a job keeps one until it finished): the finished-stage counters
  shrink as the sweep removes expired jobs.

Churn: a job "creates" ``n_tup_upd + n_tup_del`` dead tuples (the old version of
an updated row, a deleted row). A HOT update's old version is removed by page
pruning, without VACUUM; a non-HOT update or a delete leaves a dead tuple (and
index entries) that only VACUUM reclaims. So per table and in total:
``dead_per_job = (upd + del) / jobs``, ``hot_per_job = hot_upd / jobs``,
``vacuum_per_job = (upd - hot_upd + del) / jobs`` (the part that needs VACUUM).

The summary's criteria (issue 13 item 6): ``peak_dead_ok`` (the highest total
``n_dead_tup`` over ``later_*`` is under 10,000) and ``size_flat`` (total size
grows less than ``FLAT_GROWTH`` = 10 % from the sample at minute ``FLAT_FROM_MINUTE``
= 3 to the end); ``lean`` says whether ``vacuum_per_job`` of the job path (all
tables but the counters) is at most 3.

    .venv/bin/python bench/bloat.py --quick --postgres-url postgres://root@127.0.0.1:5432/bloat_i13
    .venv/bin/python bench/bloat.py --quick --quick-rate 200   # on a throwaway cluster
    .venv/bin/python bench/bloat.py                    # 10 minutes at 200 jobs/s
    .venv/bin/python bench/bloat.py --minutes 4 --naptime 5s

``run_bloat(options) -> list[dict]`` runs the same from another script (``options``
as :func:`parse_args` makes them, e.g. ``parse_args(["--quick"])``); it returns the
lines it printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The repository root first: this file's own directory would make ``bench`` bench.py.
sys.path.insert(0, str(ROOT))

SETTINGS_MODULE = "bench.bench_project.settings"
NAMESPACE = "bench"
COUNTER_TABLES = ("later_stage_counts", "later_queue_depth")
#: Seconds waited after the workers stopped, so every backend has flushed its statistics.
STATS_FLUSH_SECONDS = 1.5
WORKER_START_TIMEOUT = 60.0
DRAIN_TIMEOUT = 300.0
FLAT_FROM_MINUTE = 3
FLAT_GROWTH = 0.10
PEAK_DEAD_LIMIT = 10_000
LEAN_LIMIT = 3.0

STATS_QUERY = (
    "SELECT relname, n_live_tup, n_dead_tup, n_tup_ins, n_tup_upd, n_tup_hot_upd, "
    "n_tup_del, autovacuum_count, vacuum_count, pg_total_relation_size(relid) AS bytes "
    "FROM pg_stat_user_tables WHERE relname LIKE 'later\\_%' ORDER BY relname"
)
FINISHED_QUERY = (
    "SELECT coalesce(sum(count), 0) FROM later_stage_counts "
    "WHERE namespace = %s AND stage IN ('success', 'failed')"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="drain --jobs and print the churn")
    parser.add_argument("--jobs", type=int, default=5_000, help="--quick: jobs drained")
    parser.add_argument(
        "--postgres-url",
        default=None,
        help="--quick: a database URL (dropped and created); default a throwaway cluster",
    )
    parser.add_argument("--rate", type=float, default=200.0, help="jobs per second")
    parser.add_argument(
        "--quick-rate",
        type=float,
        default=0.0,
        help="--quick: enqueue at this rate in --batch transactions (0: batches of 500 at once)",
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=10, help="jobs per enqueue transaction")
    parser.add_argument("--retention-seconds", type=int, default=60)
    parser.add_argument("--naptime", default=None, help="autovacuum_naptime of the cluster")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--log-dir", default=None, help="keep the worker log here")
    # Internal: the enqueuing subprocess.
    parser.add_argument("--enqueuer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--enqueue-jobs", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--enqueue-seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# --- the enqueuer: its own process, Django on the run's database ---


def enqueuer(options: argparse.Namespace) -> None:
    """``--enqueue-jobs`` jobs as fast as it can (batches of 500), or ``--rate`` jobs
    a second for ``--enqueue-seconds`` in batches of ``--batch``; prints the count."""
    import django

    django.setup()
    from django.db import connection, transaction

    from bench.bench_project.tasks import noop
    from later_django.api import enqueue_many

    sent = 0
    if options.enqueue_jobs:
        while sent < options.enqueue_jobs:
            size = min(500, options.enqueue_jobs - sent)
            with transaction.atomic():
                enqueue_many(noop, [((), {})] * size)
            sent += size
    else:
        started = time.monotonic()
        total = int(options.rate * options.enqueue_seconds)
        while sent < total:
            due = started + sent / options.rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            size = min(options.batch, total - sent)
            with transaction.atomic():
                enqueue_many(noop, [((), {})] * size)
            sent += size
    connection.close()
    print(json.dumps({"sent": sent}), flush=True)


# --- the orchestrator ---


def _env(url: str, options: argparse.Namespace) -> dict[str, str]:
    env = {
        **os.environ,
        "BENCH_SYSTEM": "later_django",
        "BENCH_DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    if not options.quick:
        env["BENCH_RETENTION"] = json.dumps({"success": options.retention_seconds})
    return env


def _connect(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url, autocommit=True)


@contextlib.contextmanager
def _database(options: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Yields (url, description) of an empty database: the URL's, recreated, or
    ``bloat`` in a new throwaway cluster; dropped afterwards."""
    import psycopg
    from psycopg import sql

    if options.postgres_url:
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(options.postgres_url)
        name = parts.path.lstrip("/")
        admin_url = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            try:
                yield options.postgres_url, {"server": f"{parts.hostname}:{parts.port}"}
            finally:
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        return
    from chaos.cluster import throwaway_cluster

    settings = {"autovacuum_naptime": options.naptime} if options.naptime else {}
    with throwaway_cluster(settings) as cluster:
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE bloat")
            described = {
                "server": f"throwaway cluster {cluster.name} (PostgreSQL {cluster.version})",
                **{
                    name: admin.execute(f"SHOW {name}").fetchone()[0]
                    for name in (
                        "autovacuum",
                        "autovacuum_naptime",
                        "autovacuum_vacuum_threshold",
                        "autovacuum_vacuum_scale_factor",
                        "autovacuum_vacuum_cost_delay",
                        "autovacuum_max_workers",
                    )
                },
            }
        yield f"postgres://postgres@127.0.0.1:{cluster.port}/bloat", described


def _read_stats(conn) -> dict[str, dict[str, int]]:  # type: ignore[no-untyped-def]
    conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = conn.execute(STATS_QUERY).fetchall()
    keys = (
        "n_live_tup",
        "n_dead_tup",
        "n_tup_ins",
        "n_tup_upd",
        "n_tup_hot_upd",
        "n_tup_del",
        "autovacuum_count",
        "vacuum_count",
        "bytes",
    )
    return {row[0]: dict(zip(keys, (int(v) for v in row[1:]), strict=True)) for row in rows}


def _finished(conn) -> int:  # type: ignore[no-untyped-def]
    """Finished jobs still kept (the steady run's short retention sweeps them)."""
    return int(conn.execute(FINISHED_QUERY, (NAMESPACE,)).fetchone()[0])


def _queued(conn) -> int:  # type: ignore[no-untyped-def]
    """Delivery rows left: ready or running jobs (each job has one until it finished)."""
    return int(conn.execute("SELECT count(*) FROM later_delivery_queue").fetchone()[0])


def _failed(conn) -> int:  # type: ignore[no-untyped-def]
    return int(
        conn.execute(
            "SELECT coalesce(sum(count), 0) FROM later_stage_counts "
            "WHERE namespace = %s AND stage = 'failed'",
            (NAMESPACE,),
        ).fetchone()[0]
    )


def _start_workers(env: dict[str, str], options: argparse.Namespace, log: Path) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "django",
        "later_worker",
        "--processes",
        str(options.processes),
        "--concurrency",
        str(options.concurrency),
        "--shutdown-timeout",
        "10",
    ]
    with log.open("wb") as output:
        return subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )


def _wait_ready(conn, workers: subprocess.Popen, options: argparse.Namespace, log: Path) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WORKER_START_TIMEOUT
    while time.monotonic() < deadline:
        if workers.poll() is not None:
            raise SystemExit(
                f"later_worker exited {workers.returncode}:\n{log.read_text()[-3000:]}"
            )
        live = conn.execute(
            "SELECT count(*) FROM later_worker WHERE namespace = %s", (NAMESPACE,)
        ).fetchone()[0]
        if live >= options.processes:
            return
        time.sleep(0.1)
    raise SystemExit("later_worker not ready in time")


def _stop_workers(workers: subprocess.Popen) -> None:
    """SIGTERM to the supervisor (it stops its children), SIGKILL to the group after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        workers.send_signal(signal.SIGTERM)
    try:
        workers.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(workers.pid, signal.SIGKILL)
        workers.wait()


def _problems(log: Path) -> list[str]:
    markers = ("WARNING", "ERROR", "CRITICAL", "Traceback")
    lines = log.read_text(errors="replace").splitlines()
    return [line.strip() for line in lines if any(marker in line for marker in markers)]


def churn(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], jobs: int
) -> dict[str, Any]:
    """Dead tuples created per job, per table and in total (see the module)."""
    per_table: dict[str, dict[str, float]] = {}
    totals = {"upd": 0, "hot": 0, "del": 0, "ins": 0}
    path = {"upd": 0, "hot": 0, "del": 0}
    for table, stats in after.items():
        base = before.get(table, {})

        def delta(key: str, stats: dict[str, int] = stats, base: dict[str, int] = base) -> int:
            return stats[key] - base.get(key, 0)

        upd, hot, dele, ins = (
            delta("n_tup_upd"),
            delta("n_tup_hot_upd"),
            delta("n_tup_del"),
            delta("n_tup_ins"),
        )
        if not (upd or dele or ins):
            continue
        per_table[table] = {
            "ins": round(ins / jobs, 3),
            "upd": round(upd / jobs, 3),
            "hot_upd": round(hot / jobs, 3),
            "del": round(dele / jobs, 3),
            "dead_per_job": round((upd + dele) / jobs, 3),
            "hot_per_job": round(hot / jobs, 3),
            "vacuum_per_job": round((upd - hot + dele) / jobs, 3),
        }
        for key, value in (("upd", upd), ("hot", hot), ("del", dele), ("ins", ins)):
            totals[key] += value
        if table not in COUNTER_TABLES:
            for key, value in (("upd", upd), ("hot", hot), ("del", dele)):
                path[key] += value
    return {
        "jobs": jobs,
        "tables": per_table,
        "dead_per_job": round((totals["upd"] + totals["del"]) / jobs, 3),
        "hot_per_job": round(totals["hot"] / jobs, 3),
        "vacuum_per_job": round((totals["upd"] - totals["hot"] + totals["del"]) / jobs, 3),
        "job_path_dead_per_job": round((path["upd"] + path["del"]) / jobs, 3),
        "job_path_vacuum_per_job": round((path["upd"] - path["hot"] + path["del"]) / jobs, 3),
    }


def _emit(lines: list[dict[str, Any]], line: dict[str, Any]) -> None:
    lines.append(line)
    print(json.dumps(line), flush=True)


def _migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--verbosity", "0"],
        env=env,
        cwd=ROOT,
        check=True,
    )


def _enqueue_command(options: argparse.Namespace, *extra: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--enqueuer", *extra]


def run_bloat(options: argparse.Namespace) -> list[dict[str, Any]]:
    """Runs the quick drain or the steady run (see the module); returns the lines printed."""
    import tempfile

    lines: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        log_dir = Path(options.log_dir or stack.enter_context(tempfile.TemporaryDirectory()))
        log = log_dir / "bloat-worker.log"
        url, server = stack.enter_context(_database(options))
        env = _env(url, options)
        _migrate(env)
        conn = stack.enter_context(_connect(url))
        workers = _start_workers(env, options, log)
        try:
            _wait_ready(conn, workers, options, log)
            if options.quick:
                _quick(conn, env, workers, options, server, lines)
            else:
                _steady(conn, env, workers, options, server, lines)
        finally:
            if workers.poll() is None:
                _stop_workers(workers)
        for problem in _problems(log):
            print(f"worker log: {problem}", file=sys.stderr)
    return lines


def _quick(conn, env, workers, options, server, lines) -> None:  # type: ignore[no-untyped-def]
    before = _read_stats(conn)
    started = time.monotonic()
    if options.quick_rate:
        extra = [
            f"--rate={options.quick_rate}",
            f"--batch={options.batch}",
            f"--enqueue-seconds={options.jobs / options.quick_rate}",
        ]
    else:
        extra = [f"--enqueue-jobs={options.jobs}"]
    subprocess.run(
        _enqueue_command(options, *extra),
        env=env,
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    while _finished(conn) < options.jobs and time.monotonic() - started < DRAIN_TIMEOUT:
        time.sleep(0.2)
    seconds = time.monotonic() - started
    _stop_workers(workers)
    time.sleep(STATS_FLUSH_SECONDS)
    after = _read_stats(conn)
    done = _finished(conn)
    measured = churn(before, after, max(done, 1))
    _emit(
        lines,
        {
            "scenario": "bloat_quick",
            **server,
            "jobs": options.jobs,
            "enqueued": f"{options.quick_rate:g}/s in {options.batch}s"
            if options.quick_rate
            else "batches of 500 at once",
            "done": done,
            "seconds": round(seconds, 2),
            "note": "dead tuples created per job; vacuum_per_job = non-HOT updates + deletes",
            **measured,
            "lean": measured["job_path_vacuum_per_job"] <= LEAN_LIMIT,
        },
    )


def _total(stats: dict[str, dict[str, int]], key: str) -> int:
    return sum(table[key] for table in stats.values())


def _steady(conn, env, workers, options, server, lines) -> None:  # type: ignore[no-untyped-def]
    seconds = options.minutes * 60
    base = _read_stats(conn)
    enqueuing = subprocess.Popen(
        _enqueue_command(
            options,
            f"--rate={options.rate}",
            f"--batch={options.batch}",
            f"--enqueue-seconds={seconds}",
        ),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    started = time.monotonic()
    samples: list[dict[str, Any]] = []
    try:
        next_sample = started
        while True:
            now = time.monotonic()
            if now >= next_sample:
                stats = _read_stats(conn)
                queue = stats.get("later_delivery_queue", {})
                sample = {
                    "scenario": "bloat_sample",
                    "t": round(now - started, 1),
                    # From the statistics (flushed about once a second by busy backends):
                    # messages published and acknowledged (one per job) since the start.
                    "published": queue.get("n_tup_ins", 0)
                    - base["later_delivery_queue"]["n_tup_ins"],
                    "acked": queue.get("n_tup_del", 0) - base["later_delivery_queue"]["n_tup_del"],
                    "dead": _total(stats, "n_dead_tup"),
                    "bytes": _total(stats, "bytes"),
                    "tables": {
                        name: {k: v for k, v in table.items() if k != "vacuum_count"}
                        for name, table in stats.items()
                        if table["n_tup_ins"] or table["n_dead_tup"] or table["n_live_tup"]
                    },
                }
                samples.append(sample)
                _emit(lines, sample)
                next_sample += options.sample_seconds
            if enqueuing.poll() is not None:
                break
            time.sleep(max(0.05, min(1.0, next_sample - time.monotonic())))
        out, _ = enqueuing.communicate()
        if enqueuing.returncode:
            raise SystemExit(f"enqueuer exited {enqueuing.returncode}")
        sent = json.loads(out.strip().splitlines()[-1])["sent"]
        lag_started = time.monotonic()
        while _queued(conn) and time.monotonic() - lag_started < 60:
            time.sleep(0.2)
        drain_lag = time.monotonic() - lag_started
    finally:
        if enqueuing.poll() is None:
            enqueuing.kill()
            enqueuing.wait()
    _stop_workers(workers)
    time.sleep(STATS_FLUSH_SECONDS)
    final = _read_stats(conn)
    # Every job has one delivery row until it finished (the drain waited for none left).
    done = sent - _queued(conn)
    failed = _failed(conn)
    samples.append(
        {
            "t": round(time.monotonic() - started, 1),
            "dead": _total(final, "n_dead_tup"),
            "bytes": _total(final, "bytes"),
        }
    )
    summary = _summary(options, server, base, final, samples, sent, done, drain_lag)
    _emit(lines, {**summary, "failed": failed})


def _summary(options, server, base, final, samples, sent, done, drain_lag) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    by_minute: dict[str, int] = {}
    minutes = int(options.minutes)
    for minute in range(1, minutes + 1):
        at = [s for s in samples if s["t"] >= minute * 60 - options.sample_seconds / 2]
        if at:
            by_minute[str(minute)] = at[0]["bytes"]
    # The last sample taken while enqueuing ran (the end of the steady load).
    end_bytes = samples[-2]["bytes"] if len(samples) > 1 else samples[-1]["bytes"]
    flat_from = by_minute.get(str(FLAT_FROM_MINUTE))
    growth = None if not flat_from else round(end_bytes / flat_from - 1, 4)
    peak = max(samples, key=lambda s: s["dead"])
    vacuums = {
        name: table["autovacuum_count"] - base.get(name, {}).get("autovacuum_count", 0)
        for name, table in final.items()
        if table["autovacuum_count"] - base.get(name, {}).get("autovacuum_count", 0)
    }
    measured = churn(base, final, max(done, 1))
    peak_by_table: dict[str, int] = {}
    for sample in samples:
        for name, table in sample.get("tables", {}).items():
            peak_by_table[name] = max(peak_by_table.get(name, 0), table["n_dead_tup"])
    return {
        "scenario": "bloat",
        **server,
        "rate": options.rate,
        "minutes": options.minutes,
        "batch": options.batch,
        "retention_seconds": options.retention_seconds,
        "sent": sent,
        "done": done,
        "drain_lag_seconds": round(drain_lag, 1),
        "peak_dead": peak["dead"],
        "peak_dead_at_s": peak["t"],
        "bytes_by_minute": by_minute,
        "bytes_end": end_bytes,
        "growth_from_minute_3": growth,
        "autovacuums": vacuums,
        "peak_dead_by_table": {name: n for name, n in peak_by_table.items() if n},
        "bytes_end_by_table": {
            name: table["bytes"] for name, table in final.items() if table["n_tup_ins"]
        },
        "peak_dead_ok": peak["dead"] < PEAK_DEAD_LIMIT,
        "size_flat": growth is not None and growth < FLAT_GROWTH,
        "lean": measured["job_path_vacuum_per_job"] <= LEAN_LIMIT,
        **measured,
    }


def main(argv: list[str] | None = None) -> None:
    options = parse_args(argv)
    if options.enqueuer:
        enqueuer(options)
        return
    run_bloat(options)


if __name__ == "__main__":
    main()
