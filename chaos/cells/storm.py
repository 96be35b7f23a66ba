"""``sqlite_lock_storm``: 4 worker processes and 4 enqueuers on one WAL file.

Pass: the common checks (zero lost, every job done), and zero "database is locked"
errors reached an enqueuer (the figure also counts those the workers logged).
"""

from __future__ import annotations

from chaos.harness import LEASE, Run

WORKERS, ENQUEUERS, RATE = 4, 4, 15.0


def sqlite_lock_storm(run: Run) -> None:
    for _ in range(WORKERS):
        run.worker("--lease-seconds", str(LEASE), "--concurrency", "4")
    run.enqueue(RATE, run.profile.seconds(40), count=ENQUEUERS)
    run.finish()
    logged = sum(proc.log().count("database is locked") for proc in run.workers)
    run.result.figure("'database is locked' in worker logs", logged)
    run.result.figure("'database is locked' at enqueuers", run.stats["locked"])
    run.result.check(run.stats["locked"] == 0, "no 'database is locked' error reached an enqueuer")
