"""Exact per-job counting at the end of a cell, and the attribution of duplicates.

Rules (also in docs/reliability.md):

* **completed once**: exactly one execution, and it wrote ``done``;
* **duplicated**: more than one execution (distinct nonces). Each execution but the
  last (by start time) must be **explained**: its process was killed at or after it
  started (a pid the cell SIGKILLed), or it ran in a process that wrote an ``exit``
  line just before ``os._exit`` and started before that death (at most
  EXIT_GRACE_SECONDS after the line), or a database outage window overlaps the span
  from its start to the next execution's start (the worker could not renew its lease
  or write the outcome, so the lease lapsed). Anything else is an unexplained
  duplicate;
* **lost**: no ``done`` in the ledger and the database does not say SUCCESSFUL;
* **not successful**: the database's status of the job is not SUCCESSFUL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

from chaos.ledger import Execution

#: How long a process lives at most after writing its ``exit`` line: the line is
#: written just before ``os._exit``, so a job its other threads started in between
#: (seen in CI: 1.3 ms after the line) died with it all the same.
EXIT_GRACE_SECONDS = 0.5


@dataclass
class Faults:
    """What the cell did: kills ``(pid, at)``, ``exit`` lines ``(pid, at)`` written
    just before ``os._exit``, and outage windows ``(down, up)``."""

    kills: list[tuple[int, float]] = field(default_factory=list)
    exits: list[tuple[int, float]] = field(default_factory=list)
    outages: list[tuple[float, float]] = field(default_factory=list)

    def explains(self, execution: Execution, next_start: float) -> bool:
        """Whether the fault record explains that ``execution`` was run again."""
        for pid, at in self.kills:
            if pid == execution.pid and at >= execution.start - 0.001:
                return True
        for pid, at in self.exits:
            if pid == execution.pid and execution.start <= at + EXIT_GRACE_SECONDS:
                return True
        return any(down <= next_start and up >= execution.start for down, up in self.outages)


@dataclass
class Tally:
    committed: int = 0
    once: int = 0
    duplicated: int = 0
    explained: int = 0
    unexplained: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    not_successful: list[str] = field(default_factory=list)


def tally(
    committed: dict[str, float],
    by_job: dict[str, list[Execution]],
    statuses: dict[str, dict],
    faults: Faults,
) -> Tally:
    """Counts every committed job (see the module docstring for the rules)."""
    result = Tally(committed=len(committed))
    for job in committed:
        runs = sorted(by_job.get(job, []), key=lambda run: run.start)
        status = statuses.get(job, {}).get("status")
        if status != "SUCCESSFUL":
            result.not_successful.append(job)
        if not any(run.done is not None for run in runs) and status != "SUCCESSFUL":
            result.lost.append(job)
        if len(runs) == 1 and runs[0].done is not None:
            result.once += 1
        elif len(runs) > 1:
            result.duplicated += 1
            pairs = pairwise(runs)
            if all(faults.explains(run, following.start) for run, following in pairs):
                result.explained += 1
            else:
                result.unexplained.append(job)
    return result
