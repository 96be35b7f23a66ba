"""The figures a cell reports: latency, throughput, recovery times, CPU while down.

All times are epoch seconds (``time.time()``) as written by the processes, so
the controller's clock and the workers' are the same host clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from chaos.ledger import Execution
from chaos.procs import cpu_seconds


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile (``None`` for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def first_starts(by_job: dict[str, list[Execution]]) -> dict[str, float]:
    return {job: min(run.start for run in runs) for job, runs in by_job.items() if runs}


def latencies(
    committed: dict[str, float], by_job: dict[str, list[Execution]], window: tuple[float, float]
) -> list[float]:
    """Commit → first start, of the jobs committed within ``window``."""
    starts = first_starts(by_job)
    low, high = window
    return [starts[job] - at for job, at in committed.items() if low <= at < high and job in starts]


def throughput(executions: Iterable[Execution], window: tuple[float, float]) -> float:
    """Executions finished per second within ``window``."""
    low, high = window
    finished = sum(1 for run in executions if run.done is not None and low <= run.done < high)
    return finished / max(high - low, 1e-9)


def kill_recoveries(
    by_job: dict[str, list[Execution]], pid: int, killed_at: float
) -> dict[str, float | None]:
    """For each job running in ``pid`` when it was killed: seconds from the kill to its
    next start (``None``: never started again)."""
    recoveries: dict[str, float | None] = {}
    for job, runs in by_job.items():
        if any(run.pid == pid and run.start <= killed_at and run.done is None for run in runs):
            later = [run.start for run in runs if run.start > killed_at]
            recoveries[job] = min(later) - killed_at if later else None
    return recoveries


def outage_recovery(executions: Iterable[Execution], up_at: float) -> float | None:
    """Seconds from ``up_at`` to the first ``done`` of an execution started after it."""
    done = [run.done for run in executions if run.done is not None and run.start >= up_at]
    return min(done) - up_at if done else None


class CpuWindow:
    """CPU used by a set of processes over a window, as a fraction of one core each.

    ``pids`` is called at the start; a process gone by the end counts what it used
    until it was last seen alive (nothing, if it was never seen again).
    """

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self._start = time.monotonic()
        self._before = {pid: cpu_seconds(pid) for pid in pids()}

    def stop(self) -> dict[int, float]:
        """pid -> fraction of a core used since the window started."""
        elapsed = max(time.monotonic() - self._start, 1e-9)
        fractions = {}
        for pid, before in self._before.items():
            after = cpu_seconds(pid)
            if before is not None and after is not None:
                fractions[pid] = (after - before) / elapsed
        return fractions
