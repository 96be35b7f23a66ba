"""``poison``: bad jobs among normal ones, and a SIGTERM that outlasts a job.

Poison jobs (chaos.agent poison): a record that is not MessagePack, a task path
that is not registered, a task calling ``os._exit(1)`` (queue ``exit``, run by a
``--processes 2`` supervisor that must replace the dead children), a task
returning a non-JSON value and a sleeper (both queue ``slow``, run by a single
worker with ``--shutdown-timeout 2`` that is SIGTERMed while the sleeper sleeps).

Pass: the common checks on the normal jobs (duplicates only of jobs in a process
that wrote an ``exit`` line); each poison job ends FAILED with the expected error
(the sleeper: handed back and SUCCESSFUL on its second attempt); the SIGTERMed
worker exits 0 within 2 + STOP_BOUND s; the supervisor still has 2 children.
"""

from __future__ import annotations

import json
import signal
import time

from chaos.harness import LEASE, STOP_BOUND, Run

SHUTDOWN = 2.0
#: poison job -> (stage, text its error or reason must contain)
EXPECTED = {
    "undecodable": ("failed", "MessagePack"),
    "unregistered": ("failed", "UnregisteredTaskError"),
    "os_exit": ("failed", "WorkerLost"),
    "non_json": ("failed", "JSON"),
    "sleeper": ("success", ""),
}


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def poison(run: Run) -> None:
    jobs = json.loads(
        run.agent("poison", "--ledger", str(run.ledger.path)).strip().splitlines()[-1]
    )
    parent = run.worker(
        "--processes", "2", "--queue", "default", "--queue", "exit", "--lease-seconds", str(LEASE)
    )
    single = run.worker(
        "--queue",
        "default",
        "--queue",
        "slow",
        "--lease-seconds",
        str(LEASE),
        shutdown_timeout=SHUTDOWN,
    )
    run.enqueue(30.0, run.profile.seconds(20))
    check, add = run.result.check, run.result.figure
    started = _wait(lambda: jobs["sleeper"] in run.ledger.refresh().by_job, 60)
    check(started, "the sleeper started")
    single.signal(signal.SIGTERM)
    signalled = time.monotonic()
    status = single.wait(SHUTDOWN + STOP_BOUND)
    add("SIGTERMed worker exit s", time.monotonic() - signalled if status is not None else None)
    check(
        status == 0,
        f"the SIGTERMed worker exited 0 within {SHUTDOWN + STOP_BOUND:.0f} s (status {status})",
    )
    if status is None:
        single.kill()
    run.worker("--queue", "default", "--queue", "slow", "--lease-seconds", str(LEASE))
    _wait(lambda: len(run.ledger.refresh().exits) >= 2, 60)
    run.sleep(LEASE + 2)
    alive = run.children(parent)
    view = run.finish(records=tuple(jobs.values()))
    add("os._exit deaths", len(run.ledger.exits))
    check(len(alive) == 2, f"the supervisor replaced the children that died ({len(alive)} alive)")
    for name, (stage, text) in EXPECTED.items():
        seen = view[jobs[name]]
        why = seen["error"] or seen["reason"] or ""
        add(name, f"{seen['stage']} after {seen['attempts']} attempt(s): {why}")
        detail = f"{seen['error']} {seen['reason']} {seen['detail']}"
        check(
            seen["stage"] == stage and text in detail, f"{name} ends {stage} ({text or 'no error'})"
        )
