"""``soak`` (profile ``soak``): ``--minutes N`` of steady load on a throwaway cluster,
a SIGKILL of a random worker child every 20-45 s, and PostgreSQL restarted (stopped
3 s) at about 1/3 and 2/3 of the run. ``mariadb_soak``: the same on a throwaway
MariaDB server.

One table: jobs, lost, duplicates (explained/unexplained), max reclaim seconds,
p50/p95 latency, and the command that reproduces the run (same seed).
"""

from __future__ import annotations

import time

from chaos.cells.kills import check_reclaims, kill_child, supervisor
from chaos.cells.outages import check_recoveries, restart
from chaos.harness import Run

RATE = 30.0


def soak(run: Run) -> None:
    seconds = run.profile.minutes * 60
    parent = supervisor(run)
    run.enqueue(RATE, seconds, task_seconds=0.05)  # 50 ms jobs, so kills interrupt some
    run.wait_started()
    begin = time.monotonic()
    restarts = [begin + seconds / 3, begin + 2 * seconds / 3]
    next_kill = begin + run.random.uniform(20, 45)
    replaced, ups = [], []
    while time.monotonic() < begin + seconds:
        now = time.monotonic()
        if restarts and now >= restarts[0]:
            restarts.pop(0)
            ups.append(restart(run, 3.0))
        elif now >= next_kill:
            replaced.append(kill_child(run, parent))
            next_kill = time.monotonic() + run.random.uniform(20, 45)
        else:
            time.sleep(min(0.5, max(0.0, min([next_kill, *restarts]) - now)))
    run.finish()
    check_reclaims(run, replaced)
    check_recoveries(run, ups)
    run.result.figure(
        "reproduce",
        f".venv/bin/python -m chaos --profile soak --minutes {run.profile.minutes:g} "
        f"--seed {run.seed}",
    )
