"""The ``chain_results`` scenario of ``bench.py`` (later_django only, SQLite and
PostgreSQL): a chain of ``--chain-steps`` jobs (1,000), each a ``continue_with`` of the
one before, each returning its parent's result plus one (``context.parent_results``).

On the two workers (``later_worker --processes 2``), started and idle, each run
enqueues the whole chain in one transaction, then waits for its last step; then the
same chain whose steps never read their parent's result (``blind``), then the
results chain again, then the blind one (ABBA). A chain runs one step at a time:
each step is made ready by its parent's finish, then woken, claimed and started, so
the rate is a latency figure (commit, wake-up, claim, start, run, finish per step),
not a throughput one. Times come from the records (epoch ms, one clock):

* ``steps_per_second``: steps / (the last step's ``finished_at`` - the commit of the
  chain's enqueue), the results chains' (the value);
* ``blind_steps_per_second``: the same for the chains that do not read, and
  ``of_blind`` the ratio of the two (what reading the parent's result costs a step);
* ``last_result``: the last step's return value, which must equal the steps;
* ``enqueue_seconds``: the enqueue of a whole chain (one ``enqueue``, then a
  ``continue_with`` per step, one transaction), all four chains' mean.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from types import ModuleType
from typing import Any

#: Seconds to wait for a chain's last step.
CHAIN_TIMEOUT = 300.0


def _chain(bench: ModuleType, steps: int, read: bool) -> dict[str, Any]:
    """Enqueues a chain of ``steps`` in one transaction; waits for its last step."""
    from django.db import transaction

    from bench.bench_project.tasks import chain_step, chain_step_blind
    from bench.fan_in import _records
    from later_django.api import continue_with

    step = chain_step if read else chain_step_blind
    started = time.perf_counter()
    with transaction.atomic():
        ids = [step.enqueue().id]
        for _ in range(steps - 1):
            ids.append(continue_with(ids[-1], step).id)
    enqueue_seconds = time.perf_counter() - started
    committed_ms = time.time() * 1000
    deadline = time.monotonic() + CHAIN_TIMEOUT
    while True:
        (last,) = _records([ids[-1]])
        if last.stage in ("success", "failed", "cancelled") or time.monotonic() > deadline:
            break
        time.sleep(bench.POLL_SECONDS)
    elapsed_ms = (last.finished_at_ms or 0) - committed_ms
    return {
        "steps": steps,
        "enqueue_seconds": enqueue_seconds,
        "stage": last.stage,
        "last_result": last.return_value,
        "rate": steps / max(elapsed_ms / 1000, 1e-6) if last.stage == "success" else 0.0,
    }


def run(options: argparse.Namespace, log_dir: Path, bench: ModuleType) -> dict[str, Any]:
    """The driver: results chain, blind chain, blind chain, results chain (ABBA: a load
    that drifts during the run weighs on both alike), on the same idle workers."""
    workers = bench.start_workers(bench.LATER, options, log_dir)
    try:
        ready_s = bench.wait_until_ready(bench.LATER, workers)
        order = (True, False, False, True)
        chains = [_chain(bench, options.chain_steps, read) for read in order]
    finally:
        problems = bench.stop_workers(workers)
    reading = [chain for chain, read in zip(chains, order, strict=True) if read]
    blind = [chain for chain, read in zip(chains, order, strict=True) if not read]
    rate = sum(chain["rate"] for chain in reading) / len(reading)
    blind_rate = sum(chain["rate"] for chain in blind) / len(blind)
    return {
        "value": rate,
        "steps_per_second": rate,
        "blind_steps_per_second": blind_rate,
        "of_blind": rate / blind_rate if blind_rate else None,
        "enqueue_seconds": sum(chain["enqueue_seconds"] for chain in chains) / len(chains),
        "last_result": [chain["last_result"] for chain in reading],
        "stages": [chain["stage"] for chain in chains],
        "steps": options.chain_steps,
        "worker_start_seconds": round(ready_s, 3),
        "worker_problems": problems,
    }


def figures(results: list[dict[str, Any]], line: Any) -> list[dict[str, Any]]:
    """The scenario's JSON line: ``steps_per_second`` (the value) and the rest, medians
    over the runs."""
    import statistics

    def median(key: str) -> float:
        return round(statistics.median(result[key] for result in results), 2)

    return [
        line(
            "chain_results",
            "steps_per_second",
            "steps/s",
            True,
            steps=results[0]["steps"],
            blind_steps_per_second=median("blind_steps_per_second"),
            of_blind=median("of_blind"),
            enqueue_seconds=median("enqueue_seconds"),
            last_result=[result["last_result"] for result in results],
            stages=[result["stages"] for result in results],
            measured="steps / (the last step's finished_at - the enqueue's commit), "
            "records; each step returns its parent's result + 1 (context.parent_results)",
            worker_problems=sum(len(result["worker_problems"]) for result in results),
        )
    ]
