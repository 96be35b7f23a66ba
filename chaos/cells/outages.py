"""Database outages: ``pg_restart``, ``pg_terminate``, ``max_connections`` on PostgreSQL,
``mariadb_restart``, ``mariadb_kill`` and ``mariadb_max_connections`` (the same cells
on MariaDB: a throwaway server stopped and started, ``KILL CONNECTION`` of the
workers' sessions, a throwaway server's connections exhausted by the application's
user, which has no right to the slot MariaDB keeps for an administrator).

Each outage is recorded as a window ``(down, up)`` in ``run.faults`` (duplicates of
jobs running across it are explained by it). Pass, besides the common checks:

* ``pg_restart``: a job started after the server is back completes within
  ``RECOVERY_BOUND`` s of it; worker CPU while it is down ≤ ``IDLE_CPU`` of a core
  per process.
* ``pg_terminate``: after each round (every connection of the workers terminated),
  every job that was waiting starts within ``WAIT_BOUND`` s; the lease is
  ``TERMINATE_LEASE`` s, so a message left claimed until its lease lapses fails it.
* ``max_connections``: with every free slot held for a while, the workers' CPU stays
  ≤ ``IDLE_CPU``; after the release, recovery within ``RECOVERY_BOUND`` s.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import MySQLdb
import psycopg

from chaos import mariadb
from chaos.cells.kills import supervisor
from chaos.figures import CpuWindow, first_starts, outage_recovery
from chaos.harness import Run

RECOVERY_BOUND = 10.0
IDLE_CPU = 0.10
WAIT_BOUND = 3.0
TERMINATE_LEASE = 10.0
RATE = 40.0


def outage(
    run: Run, take_down: Callable[[], None], bring_up: Callable[[], None], seconds: float
) -> float:
    """Takes the database away for ``seconds`` while measuring the workers' CPU;
    records the window; returns when it was back (epoch seconds)."""
    down = time.time()
    take_down()
    cpu = CpuWindow(run.worker_pids)
    run.sleep(seconds)
    usage = cpu.stop()
    bring_up()
    up = time.time()
    run.faults.outages.append((down, up))
    worst = max(usage.values(), default=0.0)
    run.result.figure(
        f"worker CPU while down (outage {len(run.faults.outages)}, max/process)", worst
    )
    run.result.check(
        worst <= IDLE_CPU,
        f"outage {len(run.faults.outages)}: no worker used more than {IDLE_CPU:.0%} of a core "
        f"while the database was down ({len(usage)} processes)",
    )
    return up


def check_recoveries(run: Run, ups: list[float]) -> None:
    """After ``run.finish()``: the first completion after each ``up`` within the bound."""
    executions = run.ledger.executions()
    times = [outage_recovery(executions, up) for up in ups]
    run.result.figure("recovery s (max)", max((t for t in times if t is not None), default=None))
    run.result.check(
        all(t is not None and t <= RECOVERY_BOUND for t in times),
        f"a job completed within {RECOVERY_BOUND:.0f} s of the database coming back, "
        f"every time ({[None if t is None else round(t, 2) for t in times]})",
    )


def restart(run: Run, seconds: float) -> float:
    """Stops the run's own throwaway cluster (or MariaDB server) for ``seconds``, then
    starts it."""
    server = run.cluster
    assert server is not None, "a restart runs only on a server of the run's own"
    if isinstance(server, mariadb.Server):
        return outage(run, server.stop, server.start, seconds)
    return outage(
        run, lambda: server.ctl("stop", "-m", "fast"), lambda: server.ctl("start"), seconds
    )


def pg_restart(run: Run) -> None:
    restarts = run.profile.count(1)
    supervisor(run)
    run.enqueue(RATE, 8 + restarts * 15)
    run.wait_started()
    ups = []
    for _ in range(restarts):
        run.sleep(6)
        ups.append(restart(run, 5.0))
    run.finish()
    check_recoveries(run, ups)


def terminate_workers(run: Run) -> int:
    """``pg_terminate_backend`` (MariaDB: ``KILL CONNECTION``) of every connection of
    the workers; how many."""
    target = run.target
    if target.vendor == "mysql":
        return mariadb.kill_sessions(
            target.host, target.port, target.role_user("worker"), target.name
        )
    with psycopg.connect(run.target.admin_dsn(), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'chaos-worker'"
        ).fetchall()
    return len(rows)


def pg_terminate(run: Run) -> None:
    rounds, every = run.profile.count(5), 4.0
    run.worker("--processes", "2", "--lease-seconds", str(TERMINATE_LEASE), "--concurrency", "4")
    run.enqueue(RATE, 5 + rounds * every + 2)
    run.wait_started()
    run.sleep(3)
    moments, killed = [], 0
    for _ in range(rounds):
        run.sleep(every)
        at = time.time()
        killed += terminate_workers(run)
        moments.append(at)
        run.faults.outages.append((at, at))
    run.finish(drain_timeout=30 + 3 * TERMINATE_LEASE)
    starts = first_starts(run.ledger.by_job)
    committed = run.committed()
    waits = [
        starts[job] - at
        for at in moments
        for job, committed_at in committed.items()
        if committed_at < at and job in starts and starts[job] > at
    ]
    run.result.figure("connections terminated", killed)
    run.result.figure("jobs waiting at a round", len(waits))
    run.result.figure("wait after a round s (max)", max(waits, default=None))
    run.result.check(killed >= rounds, "every round terminated worker connections")
    run.result.check(
        all(wait <= WAIT_BOUND for wait in waits),
        f"every job waiting at a round started within {WAIT_BOUND:.0f} s of it "
        f"(lease {TERMINATE_LEASE:.0f} s)",
    )
    check_recoveries(run, moments)


def _app_connection(run: Run) -> Callable[[], Any]:
    """Opens one connection as the application's (non-superuser) role or user."""
    target = run.target
    if target.vendor == "mysql":
        options = {
            "host": target.host,
            "port": target.port,
            "user": target.role_user("app"),
            "password": target.password,
            "database": target.name,
            "connect_timeout": 3,
        }
        return lambda: MySQLdb.connect(**options)
    dsn = target.admin_dsn(user=target.user)
    return lambda: psycopg.connect(dsn, autocommit=True, connect_timeout=3)


def _grab(connect: Callable[[], Any], held: list[Any], seconds: float) -> None:
    """Opens connections into ``held`` until the server refuses for ``seconds``."""
    refused_since = None
    while True:
        try:
            held.append(connect())
            refused_since = None
        except (psycopg.OperationalError, MySQLdb.OperationalError):
            refused_since = refused_since or time.monotonic()
            if time.monotonic() - refused_since >= seconds or len(held) > 1000:
                return
            time.sleep(0.02)


def max_connections(run: Run) -> None:
    hold = run.profile.seconds(15)
    supervisor(run)
    run.enqueue(RATE, 10 + hold + 10)
    run.wait_started()
    run.sleep(4)
    held: list[Any] = []
    connect = _app_connection(run)

    def exhaust() -> None:
        _grab(connect, held, 0.2)
        terminate_workers(run)
        _grab(connect, held, 2.0)

    def release() -> None:
        for connection in held:
            with contextlib.suppress(Exception):
                connection.close()

    try:
        up = outage(run, exhaust, release, hold)
    finally:
        release()
    run.result.figure("connections held", len(held))
    run.finish()
    check_recoveries(run, [up])
