"""A cell's outcome: a table of figures and the checks that decide PASS or FAIL."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def show(value: Any) -> str:
    """Figures as text: seconds and rates to 3 significant places, ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


@dataclass
class Result:
    """Figures (label, value) in report order and checks (passed, reason)."""

    cell: str
    database: str
    figures: list[tuple[str, Any]] = field(default_factory=list)
    checks: list[tuple[bool, str]] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def figure(self, label: str, value: Any) -> Any:
        self.figures.append((label, value))
        return value

    def check(self, passed: bool, reason: str) -> bool:
        self.checks.append((bool(passed), reason))
        return bool(passed)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(passed for passed, _ in self.checks)

    def render(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        width = max([len(label) for label, _ in self.figures] + [10])
        lines = [f"== {self.cell} [{self.database}] {verdict} ({self.seconds:.0f} s)"]
        lines += [f"  {label:<{width}}  {show(value)}" for label, value in self.figures]
        lines += [f"  {'ok  ' if passed else 'FAIL'} {reason}" for passed, reason in self.checks]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)
