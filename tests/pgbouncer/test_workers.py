"""Real ``later_worker`` processes beside a web side that uses transaction pooling.

A worker needs a session of its own: ``LISTEN`` for its wake-up, and
``SET synchronous_commit = off`` on its main connection. Through session pooling
or a direct connection it has both, and wakes within milliseconds of an enqueue
made through the transaction pool. Through transaction pooling it still runs
jobs, but only by its once-a-second look, and its ``SET`` stays behind on a
server connection that pgbouncer then hands to other clients.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from later_django.worker.wakeup import PROBE_SECONDS
from tests.pgbouncer.conftest import PgBouncer, start_pooled_worker
from tests.worker.test_worker_process import (
    START_SECONDS,
    WorkerProcess,
    Workers,
    events,
    fetch,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: Jobs enqueued one by one while the worker idles, this many seconds apart.
LABELS, PAUSE = ["first", "second", "third", "fourth"], 0.3
#: Woken by NOTIFY, a worker runs each within milliseconds; waking only at its
#: 1 s idle look, one of four jobs 0.3 s apart waits at least 0.7 s.
PROMPT_SECONDS = 0.5


def listening(alias: str) -> bool:
    """Whether a backend of the test database is in ``LISTEN``."""
    rows = fetch(
        alias,
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
        "AND query LIKE 'LISTEN%%'",
    )
    return bool(rows)


def wake_up_delays(
    web_side, pool: PgBouncer, lines: Path, worker: WorkerProcess, workers: Workers
) -> list[float]:
    """Enqueues :data:`LABELS` through ``pool`` from the web side, :data:`PAUSE` apart,
    waits until ``worker`` ran them all, and returns how long after each commit it ran."""
    committed = web_side(pool.route(), "paced_enqueue", path=str(lines), labels=LABELS, pause=PAUSE)
    runs = wait_for(
        lambda: len(events(lines, "run")) == len(LABELS) and events(lines, "run"),
        10,
        "every paced job run",
        workers,
    )
    assert {run["pid"] for run in runs} == {worker.pid}
    return [run["at"] - committed[run["label"]] for run in runs]


def stop(worker: WorkerProcess) -> None:
    worker.send(signal.SIGTERM)
    assert worker.wait_exit(15) == 0, worker.describe()


@pytest.mark.parametrize("route", ["session pooling", "direct"])
def test_a_worker_with_its_own_session_wakes_at_once_for_jobs_enqueued_through_transaction_pooling(
    pg_alias: str, transaction_pool, request, web_side, workers, lines: Path, route: str
) -> None:
    if route == "direct":
        worker = workers.start(pg_alias)
    else:
        worker = start_pooled_worker(workers, pg_alias, request.getfixturevalue("session_pool"))
    wait_for(lambda: listening(pg_alias), START_SECONDS, "the worker's LISTEN", workers)

    delays = wake_up_delays(web_side, transaction_pool, lines, worker, workers)

    assert max(delays) < PROMPT_SECONDS, delays
    # Its LISTEN probe came back: no warning, even after the probe's deadline.
    time.sleep(PROBE_SECONDS)
    assert "cannot listen" not in worker.log(), worker.describe()
    stop(worker)


def test_a_worker_through_transaction_pooling_only_polls_and_leaks_its_session_setting(
    pg_alias: str, single_server_transaction_pool, web_side, workers, lines: Path
) -> None:
    pool = single_server_transaction_pool
    worker = start_pooled_worker(workers, pg_alias, pool)

    # Its SET synchronous_commit = off outlives its transaction on the one server
    # connection, so any other client of the pool (a web request) commits
    # asynchronously too.
    with pool.connect() as other:
        wait_for(
            lambda: other.execute("SHOW synchronous_commit").fetchone() == ("off",),
            START_SECONDS,
            "the worker's session setting seen by another client",
            workers,
        )

    # Jobs still run, but only at the once-a-second look, and the worker says why.
    delays = wake_up_delays(web_side, pool, lines, worker, workers)
    assert max(delays) > PROMPT_SECONDS, delays
    wait_for(
        lambda: "this connection cannot listen (PgBouncer in transaction pooling?)" in worker.log(),
        START_SECONDS,
        "the worker's warning that its LISTEN receives nothing",
        workers,
    )
    stop(worker)


def test_pgbouncer_delivers_notifications_in_session_pooling_only(
    pg_alias: str, transaction_pool, session_pool
) -> None:
    """Why: in transaction pooling a ``LISTEN`` stays on a server connection that
    is no longer linked to the listener, and pgbouncer drops what it receives."""
    received = {}
    for name, pool in {"transaction": transaction_pool, "session": session_pool}.items():
        with pool.connect() as listener:
            listener.execute('LISTEN "later_django"')
            fetch(pg_alias, "SELECT pg_notify('later_django', %s)", [name])
            received[name] = [n.payload for n in listener.notifies(timeout=1.0, stop_after=1)]
    assert received == {"transaction": [], "session": ["session"]}
