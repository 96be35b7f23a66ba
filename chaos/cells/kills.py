"""``sigkill``: SIGKILL of a random ``--processes 2`` child every few seconds under load.

Pass: the common checks, every job running in a killed child starts again within
``LEASE + RECLAIM_BOUND`` seconds of the kill, and the supervisor has two
children again within ``REPLACE_BOUND`` seconds of each kill.
"""

from __future__ import annotations

import os
import signal
import time

from chaos.figures import kill_recoveries
from chaos.harness import LEASE, Proc, Run

#: Seconds beyond the lease a killed job may wait for its next start (the once-a-second
#: look for lapsed leases, plus a claim).
RECLAIM_BOUND = 3.0
#: Seconds the supervisor may take to replace a killed child.
REPLACE_BOUND = 3.0
RATE = 50.0


def supervisor(run: Run, processes: int = 2) -> Proc:
    """``later_worker --processes N --lease-seconds LEASE --concurrency 4``."""
    return run.worker(
        "--processes", str(processes), "--lease-seconds", str(LEASE), "--concurrency", "4"
    )


def kill_child(run: Run, parent: Proc, processes: int = 2) -> float | None:
    """SIGKILLs a random child of ``parent`` (recorded as a fault); seconds until the
    supervisor has ``processes`` children again (``None``: not within 10 s)."""
    children = run.children(parent)
    if not children:
        run.result.check(False, f"supervisor {parent.pid} had no child to kill")
        return None
    pid = run.random.choice(children)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    run.faults.kills.append((pid, killed_at))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = run.children(parent)
        if pid not in now and len(now) >= processes:
            return time.time() - killed_at
        time.sleep(0.02)
    return None


def check_reclaims(run: Run, replaced: list[float | None], *, bounded: bool = True) -> None:
    """Figures and checks of the kills recorded so far (after ``run.finish()``).
    ``bounded=False``: no bound on the restarts (a cell whose backlog queues them
    behind thousands of jobs), only that each happened."""
    recoveries: dict[str, float | None] = {}
    for pid, at in run.faults.kills:
        recoveries.update(kill_recoveries(run.ledger.by_job, pid, at))
    known = [seconds for seconds in recoveries.values() if seconds is not None]
    add, check = run.result.figure, run.result.check
    add("kills", len(run.faults.kills))
    add("jobs interrupted by kills", len(recoveries))
    add("reclaim s (max)", max(known, default=None))
    never = [job for job, seconds in recoveries.items() if seconds is None]
    bound = LEASE + RECLAIM_BOUND
    check(not never, f"every interrupted job started again (not: {never[:5]})")
    if bounded:
        check(
            all(s <= bound for s in known),
            f"every interrupted job restarted within {bound:.0f} s of the kill",
        )
    if replaced:
        slowest = max((s for s in replaced if s is not None), default=None)
        add("supervisor replace s (max)", slowest)
        check(
            None not in replaced and (slowest or 0) <= REPLACE_BOUND,
            f"the supervisor replaced every killed child within {REPLACE_BOUND:.0f} s",
        )


def sigkill(run: Run) -> None:
    kills, every = run.profile.count(6), 5.0
    parent = supervisor(run)
    run.enqueue(RATE, 5 + kills * every + 3, task_seconds=0.05)
    run.wait_started()
    run.sleep(3)
    replaced = []
    for _ in range(kills):
        run.sleep(every * run.random.uniform(0.6, 1.2))
        replaced.append(kill_child(run, parent))
    run.finish()
    check_reclaims(run, replaced)
