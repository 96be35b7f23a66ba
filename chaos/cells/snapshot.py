"""``snapshot_pin``: a connection idle in a REPEATABLE READ transaction pins the
snapshot (vacuum cannot remove dead rows) while load runs. ``mariadb_snapshot``: the
same on a throwaway MariaDB server (InnoDB's purge cannot remove the old versions:
the history list grows).

Figures per phase (before, during, after the pin): throughput, p50/p95 latency,
``n_dead_tup`` of the ``later_*`` tables (MariaDB: the history list length,
``trx_rseg_history_len``). Pass: the common checks, and throughput during the pin
≥ ``THROUGHPUT_FLOOR`` x before.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from itertools import pairwise

import psycopg

from chaos import mariadb
from chaos.cells.kills import supervisor
from chaos.figures import latencies, percentile, throughput
from chaos.harness import Run

RATE = 75.0
THROUGHPUT_FLOOR = 0.8


def dead_tuples(run: Run) -> int:
    """Sum of ``n_dead_tup`` over the ``later_*`` tables (statistics lag ~1 s);
    MariaDB: the history list length (undo logs not purged yet, the whole server's)."""
    if run.target.vendor == "mysql":
        connection = mariadb.admin_connection(run.target.host, run.target.port)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT `COUNT` FROM information_schema.INNODB_METRICS "
                    "WHERE NAME = 'trx_rseg_history_len'"
                )
                row = cursor.fetchone()
        finally:
            connection.close()
        return int(row[0]) if row else 0
    with psycopg.connect(run.target.admin_dsn(), autocommit=True) as admin:
        (total,) = admin.execute(
            "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables "
            "WHERE relname LIKE 'later%%'"
        ).fetchone()
    return int(total)


@contextlib.contextmanager
def pinned_snapshot(run: Run) -> Iterator[None]:
    """A connection in a REPEATABLE READ transaction that has read ``later_storage``,
    open for the ``with`` block, rolled back at its end."""
    target = run.target
    if target.vendor == "mysql":
        pin = mariadb.admin_connection(target.host, target.port, target.name)
        try:
            with pin.cursor() as cursor:
                cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                cursor.execute("SELECT count(*) FROM later_storage")
                cursor.fetchone()
                yield
                cursor.execute("ROLLBACK")
        finally:
            pin.close()
        return
    with psycopg.connect(target.admin_dsn(), autocommit=True) as connection:
        connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        connection.execute("SELECT count(*) FROM later_storage").fetchone()
        yield
        connection.execute("ROLLBACK")


def snapshot_pin(run: Run) -> None:
    before, pinned, after = (
        run.profile.seconds(10),
        run.profile.seconds(45),
        run.profile.seconds(10),
    )
    supervisor(run)
    # Two enqueuers: one alone commits about 60 jobs/s on this machine.
    run.enqueue(RATE / 2, 3 + before + pinned + after, count=2)
    run.wait_started()
    marks = [time.time()]
    run.sleep(before)
    dead = [dead_tuples(run)]
    with pinned_snapshot(run):
        marks.append(time.time())
        run.sleep(pinned)
        dead.append(dead_tuples(run))
    marks.append(time.time())
    run.sleep(after)
    marks.append(time.time())
    dead.append(dead_tuples(run))
    run.finish()
    committed, executions = run.committed(), run.ledger.executions()
    rates = []
    unpurged = "history list length" if run.target.vendor == "mysql" else "n_dead_tup"
    for name, window, dead_rows in zip(
        ("before", "pinned", "after"), pairwise(marks), dead, strict=True
    ):
        waits = latencies(committed, run.ledger.by_job, window)
        rates.append(throughput(executions, window))
        run.result.figure(f"{name}: jobs/s", rates[-1])
        run.result.figure(
            f"{name}: p50 / p95 s",
            f"{percentile(waits, 0.5) or 0:.3f} / {percentile(waits, 0.95) or 0:.3f}",
        )
        run.result.figure(f"{name}: {unpurged} (end)", dead_rows)
    run.result.check(
        rates[1] >= THROUGHPUT_FLOOR * rates[0],
        f"throughput while pinned >= {THROUGHPUT_FLOOR:.0%} of before "
        f"({rates[1]:.1f} vs {rates[0]:.1f} jobs/s)",
    )
