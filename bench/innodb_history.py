"""What a drained job leaves behind on MariaDB/MySQL (InnoDB): rows kept, rows
changed, and the undo history the purge threads must clear.

PostgreSQL's counterpart is ``bench/bloat.py --quick`` (dead tuples per table, exact).
InnoDB keeps no dead row versions in the table: an ``UPDATE`` changes the row in
place and writes the old version to the undo log; a ``DELETE`` only marks the row
(and its secondary index entries) deleted. Once no read view needs them, the purge
threads remove the marked rows and free the undo logs. The "History list length"
(``SHOW ENGINE INNODB STATUS``) counts the committed transactions whose update undo
logs the purge has not processed yet: it is what a burst of jobs leaves to clean up.

For each system (``--systems``, default ``later_django,django-tasks-db``), on a
database of its own (``--mariadb-url``, dropped and created, dropped at the end),
with its two workers started and idle (as ``bench.py``'s drain):

1. ``--idle-seconds`` (10) with nothing enqueued: the server-wide row counters
   (``Handler_write/update/delete``: MariaDB has no ``Innodb_rows_*``) and the
   history list length move by what other sessions on the server do (and the idle
   workers): the background rate.
2. ``--jobs`` (5,000) no-op jobs published in one transaction; drained (stage
   counters / django-tasks-db's statuses, every 0.1 s); the history list length
   sampled every 0.1 s meanwhile (its peak).
3. After the last job: the history list length watched every 0.25 s until it is
   back within ``--slack`` (200) of where it was before the publish, or
   ``--purge-timeout`` (120 s): ``purge_seconds``.
4. Every table of the system: exact ``COUNT(*)`` (the rows a drained job keeps),
   and ``information_schema.TABLES`` sizes.

Row changes per job = (counter delta over the drain - the background rate x the
drain's seconds) / jobs. The counters and the history length are server-wide: on a
shared server they hold other sessions' work too; the background subtraction
assumes that work steady. The purge's own CPU and its undo pages are not measured:
``information_schema.INNODB_METRICS``' purge counters are off by default and turning
them on (``SET GLOBAL innodb_monitor_enable``) reconfigures the server.

    .venv/bin/python bench/innodb_history.py --mariadb-url mysql://root@127.0.0.1:3306/bench_later

One JSON line per system on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The repository root first: this file's own directory would make ``bench`` this script.
sys.path.insert(0, str(ROOT))

from bench import bench  # noqa: E402  (after the path is set)

#: Server-wide row writes (MariaDB 10.11 has no ``Innodb_rows_*``): every engine's,
#: internal temporary tables' too.
ROW_COUNTERS = ("Handler_write", "Handler_update", "Handler_delete")
TABLE_PREFIXES = {bench.LATER: "later_", bench.DTDB: "django_tasks_database_"}


def history_length() -> int:
    """The "History list length" line of ``SHOW ENGINE INNODB STATUS``."""
    status = bench._sql_rows("SHOW ENGINE INNODB STATUS", [])[0][2]
    found = re.search(r"History list length (\d+)", status)
    if found is None:
        raise SystemExit("no 'History list length' in SHOW ENGINE INNODB STATUS")
    return int(found.group(1))


def row_counters() -> dict[str, int]:
    rows = bench._sql_rows(
        "SHOW GLOBAL STATUS WHERE Variable_name IN (%s, %s, %s)", list(ROW_COUNTERS)
    )
    by_name = {name.lower(): int(value) for name, value in rows}  # spelled as the server likes
    return {name: by_name[name.lower()] for name in ROW_COUNTERS}


def tables(system: str) -> dict[str, dict[str, int]]:
    """Every table of the system: exact rows, and InnoDB's data, index and free bytes."""
    from django.db import connection

    rows = bench._sql_rows(
        "SELECT table_name, data_length, index_length, data_free FROM information_schema.tables"
        " WHERE table_schema = DATABASE() AND table_name LIKE %s ORDER BY table_name",
        [TABLE_PREFIXES[system] + "%"],
    )
    found = {}
    for name, data, index, free in rows:
        quoted = connection.ops.quote_name(name)
        count = bench._sql_value(f"SELECT COUNT(*) FROM {quoted}")
        found[name] = {"rows": count, "data_bytes": data, "index_bytes": index, "free_bytes": free}
    return found


def measure(options: argparse.Namespace) -> dict[str, Any]:
    """The driver: runs in a process whose environment names the system and database."""
    import django

    django.setup()
    system = os.environ["BENCH_SYSTEM"]
    log_dir = Path(options.log_dir)
    options.label = f"innodb-{system}"
    workers = bench.start_workers(system, options, log_dir)
    peak = [0]
    try:
        bench.wait_until_ready(system, workers)
        idle_from, idle_rows, idle_history = time.perf_counter(), row_counters(), history_length()
        time.sleep(options.idle_seconds)
        idle_s = time.perf_counter() - idle_from
        background = {
            name: (value - idle_rows[name]) / idle_s for name, value in row_counters().items()
        }
        history_before, rows_before = history_length(), row_counters()
        before = bench.finished_count(system)
        bench.enqueue_batch(system, bench.tasks_of(system).noop, [((), {})] * options.jobs)
        sampling = threading.Event()

        def sample() -> None:  # its own connection (Django's are per thread)
            from django.db import connection

            try:
                while not sampling.is_set():
                    peak[0] = max(peak[0], history_length())
                    time.sleep(0.1)
            finally:
                connection.close()

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        seconds, success, failed = bench.wait_finished(
            system, options.jobs, options.drain_timeout, before
        )
        drained_rows, history_drained = row_counters(), history_length()
        sampling.set()
        sampler.join()
        drained_at = time.perf_counter()
        history = history_drained
        while history > history_before + options.slack:
            if time.perf_counter() - drained_at > options.purge_timeout:
                break
            time.sleep(0.25)
            history = history_length()
        purge_s = time.perf_counter() - drained_at
        purged = history <= history_before + options.slack
        kept = tables(system)
    finally:
        problems = bench.stop_workers(workers)
    done = max(success + failed, 1)
    drain_s = seconds
    per_job = {
        name.removeprefix("Handler_"): round(
            (drained_rows[name] - rows_before[name] - background[name] * drain_s) / done, 2
        )
        for name in ROW_COUNTERS
    }
    return {
        "system": system,
        "jobs": options.jobs,
        "completed": success + failed,
        "drain_seconds": round(drain_s, 3),
        "drain_jobs_per_s": round(done / drain_s, 1),
        "rows_changed_per_job": per_job,
        "rows_changed_during_drain": {
            name.removeprefix("Handler_"): drained_rows[name] - rows_before[name]
            for name in ROW_COUNTERS
        },
        "background_rows_per_s": {
            name.removeprefix("Handler_"): round(rate, 1) for name, rate in background.items()
        },
        "history_idle_start": idle_history,
        "history_before": history_before,
        "history_peak": max(peak[0], history_drained),
        "history_after_drain": history_drained,
        "history_growth_per_job": round((history_drained - history_before) / done, 3),
        "history_peak_growth_per_job": round(
            (max(peak[0], history_drained) - history_before) / done, 3
        ),
        "purge_seconds": round(purge_s, 2) if purged else None,
        "purge_timed_out": not purged,
        "history_at_end": history,
        "tables": kept,
        "rows_kept_per_job": round(sum(table["rows"] for table in kept.values()) / done, 2),
        "worker_problems": problems,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mariadb-url", default="mysql://root@127.0.0.1:3306/bench_later")
    parser.add_argument("--systems", default=f"{bench.LATER},{bench.DTDB}")
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--slack", type=int, default=200)
    parser.add_argument("--purge-timeout", type=float, default=120.0)
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--concurrency", type=int, default=16, help="later_worker threads")
    parser.add_argument("--dtdb-interval", type=float, default=0.1, help="db_worker --interval")
    parser.add_argument("--metrics-port", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--log-dir", help="keep the workers' logs here")
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.driver:
        print(json.dumps(measure(options)), flush=True)
        return
    systems = [name.strip() for name in options.systems.split(",") if name.strip()]
    if bench.DTDB in systems:
        bench.ensure_package(bench.DTDB)
    with tempfile.TemporaryDirectory(prefix="later-innodb-") as directory:
        for system in systems:
            with bench.fresh_database("mariadb", options, Path(directory), system) as url:
                bench.migrate(url, system, {})
                completed = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--driver",
                        *sys.argv[1:],
                        "--log-dir",
                        options.log_dir or directory,
                    ],
                    env=bench.driver_env(system, url, {}),
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    text=True,
                    check=True,
                )
                line = json.loads(completed.stdout.strip().splitlines()[-1])
                line["version"] = bench.installed_version(
                    "later-django" if system == bench.LATER else system
                )
                line["load_average"] = os.getloadavg()
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
