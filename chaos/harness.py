"""The run of one cell: its directory, database, processes, load, drain and final count.

A :class:`Run` starts ``later_worker`` processes and enqueuers on its
:class:`~chaos.databases.Target`, records the faults the cell injects
(:class:`~chaos.counting.Faults`), and at the end (:meth:`Run.finish`) drains,
stops the workers with SIGTERM (timing each exit), asks the database for every
job's status and adds the common figures and checks (exact count, lost,
unexplained duplicates, database status, latency) to the cell's
:class:`~chaos.report.Result`. :meth:`Run.close` kills whatever is left.
"""

from __future__ import annotations

import json
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos.cluster import Cluster
from chaos.counting import Faults, tally
from chaos.databases import Target
from chaos.figures import latencies, percentile, throughput
from chaos.ledger import Ledger, committed_ids
from chaos.mariadb import Server
from chaos.procs import REGISTRY, Proc, children_of
from chaos.report import Result

#: Seconds a SIGTERMed worker may take beyond its --shutdown-timeout.
STOP_BOUND = 5.0
#: ``--lease-seconds`` of the cells' workers (small, so reclaims are quick).
LEASE = 3.0
#: Seconds an enqueuer may take, past the end of its load, to finish.
ENQUEUER_GRACE = 60.0


@dataclass(frozen=True)
class Profile:
    """Sizes: ``scale`` multiplies every duration and count a cell takes from it."""

    name: str
    scale: float
    minutes: float = 30.0

    def seconds(self, short: float) -> float:
        return short * self.scale

    def count(self, short: int) -> int:
        return max(1, round(short * self.scale))


@dataclass
class Run:
    """One cell on one database (see the module docstring)."""

    result: Result
    target: Target
    directory: Path
    profile: Profile
    seed: int
    #: the run's own server (throwaway cluster or MariaDB server), if any
    cluster: Cluster | Server | None = None
    faults: Faults = field(default_factory=Faults)
    workers: list[Proc] = field(default_factory=list)
    #: (enqueuer, its stats file)
    enqueuers: list[tuple[Proc, Path]] = field(default_factory=list)
    #: the longest --shutdown-timeout of the workers started
    shutdown_timeout: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)
    #: When (``time.monotonic()``) the last enqueuer started ends its load.
    enqueuing_until: float = 0.0

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)
        self.ledger = Ledger(self.directory / "ledger.jsonl")

    # --- processes ---

    def worker(self, *options: str, shutdown_timeout: float = 5.0) -> Proc:
        """Starts ``python -m django later_worker <options>`` (its own session)."""
        self.shutdown_timeout = max(self.shutdown_timeout, shutdown_timeout)
        name = f"worker-{len(self.workers)}"
        argv = ["-m", "django", "later_worker", "--shutdown-timeout", str(shutdown_timeout)]
        proc = REGISTRY.spawn(
            name, [*argv, *options], self.target.env("worker"), self.directory / f"{name}.log"
        )
        self.workers.append(proc)
        return proc

    def worker_pids(self) -> list[int]:
        """Every live worker process (supervisors and their children)."""
        return [pid for proc in self.workers for pid in proc.members()]

    def children(self, supervisor: Proc) -> list[int]:
        return children_of(supervisor.pid)

    def enqueue(
        self, rate: float, seconds: float, count: int = 1, task_seconds: float = 0.0
    ) -> None:
        """Starts ``count`` enqueuers, each at ``rate`` jobs/s for ``seconds``."""
        self.enqueuing_until = max(self.enqueuing_until, time.monotonic() + seconds)
        for _ in range(count):
            index = len(self.enqueuers)
            argv = [
                "-m", "chaos.agent", "enqueue",
                "--ids", str(self.directory / f"ids-{index}.jsonl"),
                "--stats", str(self.directory / f"stats-{index}.json"),
                "--ledger", str(self.ledger.path),
                "--rate", str(rate), "--seconds", str(seconds),
                "--task-seconds", str(task_seconds),
            ]  # fmt: skip
            log = self.directory / f"enqueuer-{index}.log"
            proc = REGISTRY.spawn(f"enqueuer-{index}", argv, self.target.env("enqueuer"), log)
            self.enqueuers.append((proc, self.directory / f"stats-{index}.json"))

    def agent(self, *argv: str, timeout: float = 180) -> str:
        """Runs ``python -m chaos.agent <argv>`` to its end; returns its stdout."""
        log = self.directory / "agent.log"
        proc = REGISTRY.spawn("agent", ["-m", "chaos.agent", *argv], self.target.env("agent"), log)
        status = proc.wait(timeout)
        if status != 0:
            proc.kill()
            raise RuntimeError(f"chaos.agent {argv[0]} failed ({status}):\n{proc.log()[-3000:]}")
        return proc.log()

    def committed(self) -> dict[str, float]:
        return committed_ids(sorted(self.directory.glob("ids-*.jsonl")))

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait_started(self, timeout: float = 60.0) -> float:
        """Waits for the first ledger ``start``; returns when it was seen."""
        deadline = time.monotonic() + timeout
        while not self.ledger.refresh().by_job:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no job started within {timeout} s")
            time.sleep(0.1)
        return time.time()

    # --- the end ---

    def wait_enqueuers(self) -> dict[str, int]:
        """Waits for the enqueuers to finish (each may take ENQUEUER_GRACE past the end
        of its load, whatever the profile's length); their summed stats."""
        totals = {"committed": 0, "errors": 0, "locked": 0}
        deadline = self.enqueuing_until + ENQUEUER_GRACE
        for proc, stats_path in self.enqueuers:
            if proc.wait(max(0.1, deadline - time.monotonic())) is None:
                proc.kill()
                self.result.check(
                    False, f"{proc.name} did not finish within {ENQUEUER_GRACE:.0f} s of its load"
                )
            stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
            for key in totals:
                totals[key] += stats.get(key, 0)
        return totals

    def drain(self, timeout: float) -> float:
        """Waits until every committed id has a ``done`` (or ``timeout``); seconds taken."""
        started = time.monotonic()
        committed = self.committed()
        while time.monotonic() - started < timeout:
            if set(committed) <= self.ledger.refresh().done_jobs:
                break
            time.sleep(0.25)
        return time.monotonic() - started

    def stop_workers(self) -> None:
        """SIGTERM to every worker; checks each exits within shutdown timeout + bound."""
        limit = self.shutdown_timeout + STOP_BOUND
        for proc in self.workers:
            proc.signal(signal.SIGTERM)
        signalled = time.monotonic()
        slow = []
        for proc in self.workers:
            status = proc.wait(max(0.1, limit - (time.monotonic() - signalled)))
            leftovers = proc.members()
            if status is None or leftovers:
                slow.append(f"{proc.name} (pid {proc.pid}, left: {leftovers})")
                proc.kill()
        self.result.figure("worker stop s (max)", time.monotonic() - signalled)
        self.result.check(
            not slow,
            f"every worker exited within {limit:.0f} s of SIGTERM"
            + (f"; not: {slow}" if slow else ""),
        )

    def finish(self, drain_timeout: float | None = None, records: tuple[str, ...] = ()) -> dict:
        """Drain, stop, count; adds the common figures and checks. The database view."""
        stats = self.wait_enqueuers()
        drained = self.drain(drain_timeout or 30.0 + 3 * LEASE)
        self.result.figure("drain s", drained)
        self.stop_workers()
        out = self.directory / "results.json"
        ids = [str(path) for path in sorted(self.directory.glob("ids-*.jsonl"))]
        self.agent("results", "--out", str(out), "--ids", *ids, "--records", *records)
        view = json.loads(out.read_text())
        self.ledger.refresh()
        self.faults.exits.extend(self.ledger.exits)
        self.stats = stats
        self._count(view)
        return view

    def _count(self, view: dict) -> None:
        """The exact count of every committed job: common figures and checks."""
        committed = self.committed()
        counted = tally(committed, self.ledger.by_job, view, self.faults)
        load = (min(committed.values(), default=0.0), max(committed.values(), default=0.0))
        waits = latencies(committed, self.ledger.by_job, (0.0, float("inf")))
        add = self.result.figure
        add("jobs committed", counted.committed)
        add("enqueue errors (retried)", self.stats["errors"])
        add("completed once", counted.once)
        add("duplicated (explained)", f"{counted.duplicated} ({counted.explained})")
        add("lost", len(counted.lost))
        add("latency p50 s", percentile(waits, 0.5))
        add("latency p95 s", percentile(waits, 0.95))
        add("throughput jobs/s (while enqueuing)", throughput(self.ledger.executions(), load))
        check = self.result.check
        check(counted.committed > 0, "jobs were committed")
        check(not counted.lost, f"zero lost (lost: {counted.lost[:5]})")
        check(
            not counted.unexplained,
            f"every duplicate explained (unexplained: {counted.unexplained[:5]})",
        )
        check(
            not counted.not_successful,
            f"every job SUCCESSFUL in the database (not: {counted.not_successful[:5]})",
        )

    def close(self) -> None:
        REGISTRY.kill_all()
