"""Reading what the processes wrote: the ledger (chaos.tasks) and the ids files
(chaos.agent enqueue).

:class:`Ledger` tails the ledger file incrementally (only whole lines), and
groups the lines into :class:`Execution` s, one per nonce.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every whole JSON line of ``path`` (none if it does not exist yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def committed_ids(paths: list[Path]) -> dict[str, float]:
    """job id -> commit time (epoch seconds) over the enqueuers' ids files."""
    return {line["job"]: line["at"] for path in paths for line in read_lines(path)}


@dataclass
class Execution:
    """One run of a job in one process (one nonce of the ledger)."""

    job: str
    nonce: str
    pid: int
    attempt: int
    start: float
    done: float | None = None


class Ledger:
    """The ledger file, read incrementally: executions by job, exits by pid."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._by_nonce: dict[str, Execution] = {}
        self.by_job: dict[str, list[Execution]] = defaultdict(list)
        self.exits: list[tuple[int, float]] = []
        self.done_jobs: set[str] = set()

    def refresh(self) -> Ledger:
        """Reads the lines appended since the last call (a partial last line waits)."""
        try:
            with open(self.path, "rb") as file:
                file.seek(self._offset)
                chunk = file.read()
        except FileNotFoundError:
            return self
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(whole)
        for raw in whole.splitlines():
            self._add(json.loads(raw))
        return self

    def _add(self, line: dict[str, Any]) -> None:
        if line["event"] == "exit":
            self.exits.append((line["pid"], line["at"]))
        elif line["event"] == "start":
            execution = Execution(
                line["job"], line["nonce"], line["pid"], line["attempt"], line["at"]
            )
            self._by_nonce[execution.nonce] = execution
            self.by_job[execution.job].append(execution)
        elif line["event"] == "done":
            self._by_nonce[line["nonce"]].done = line["at"]
            self.done_jobs.add(line["job"])

    def executions(self) -> list[Execution]:
        return list(self._by_nonce.values())
