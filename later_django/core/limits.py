"""``LATER["QUEUE_LIMITS"]``: how many jobs of a queue may run at once, and start per
interval, across every worker of the namespace.

    LATER = {"QUEUE_LIMITS": {
        "emails": {"concurrency": 5},
        "partner_api": {"rate": "100/60s", "concurrency": 10},
    }}

``concurrency``: a positive integer. ``rate``: ``"<count>/<window>"`` with the window
a positive number and a unit ``s``, ``m`` or ``h`` (``"100/60s"``, ``"5/1m"``): at
most ``count`` starts in any window of that length (a sliding window, never fixed
buckets). A count above :data:`MAX_RATE_COUNT` is refused (each start within the
window is kept in one stored value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_CONCURRENCY = 10_000
MAX_RATE_COUNT = 10_000
_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*([smh])\s*")
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000}
_KEYS = ("concurrency", "rate")


@dataclass(frozen=True)
class QueueLimit:
    """One queue's limits; ``None`` where none is set."""

    concurrency: int | None = None
    rate_count: int | None = None
    rate_window_ms: int | None = None


def parse_rate(value: object, where: str) -> tuple[int, int]:
    """``(count, window ms)`` of a rate such as ``"100/60s"``; ``ValueError`` naming
    ``where`` and the rule otherwise."""
    match = _RATE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(
            f"{where} must be '<count>/<window>' with a unit s, m or h (for example "
            f"'100/60s'), got {value!r}"
        )
    count, window = int(match.group(1)), float(match.group(2)) * _UNIT_MS[match.group(3)]
    if not 1 <= count <= MAX_RATE_COUNT:
        raise ValueError(f"{where}: the count must be 1 to {MAX_RATE_COUNT}, got {count}")
    if window < 1:
        raise ValueError(f"{where}: the window must be at least a millisecond, got {value!r}")
    return count, int(window)


def queue_limit(raw: object, where: str) -> QueueLimit:
    """The :class:`QueueLimit` of one queue's mapping; ``ValueError`` naming ``where``."""
    if not isinstance(raw, Mapping) or not raw:
        raise ValueError(f"{where} must be a dict with 'concurrency' and/or 'rate', got {raw!r}")
    unknown = sorted(str(key) for key in raw if key not in _KEYS)
    if unknown:
        raise ValueError(f"{where} has unknown key(s) {unknown}; allowed: {list(_KEYS)}")
    concurrency = raw.get("concurrency")
    if concurrency is not None and (
        isinstance(concurrency, bool)
        or not isinstance(concurrency, int)
        or not 1 <= concurrency <= MAX_CONCURRENCY
    ):
        raise ValueError(
            f"{where}['concurrency'] must be an integer from 1 to {MAX_CONCURRENCY}, "
            f"got {concurrency!r}"
        )
    count = window = None
    if raw.get("rate") is not None:
        count, window = parse_rate(raw["rate"], f"{where}['rate']")
    return QueueLimit(concurrency, count, window)


def queue_limits(raw: Any) -> dict[str, QueueLimit]:
    """Every queue's limit from ``LATER["QUEUE_LIMITS"]``; ``ValueError`` at the first
    bad entry (queue names are checked where queue names are)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"LATER['QUEUE_LIMITS'] must be a dict of queue names, got {raw!r}")
    limits: dict[str, QueueLimit] = {}
    for name, options in raw.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"LATER['QUEUE_LIMITS'] has a key that is no queue name: {name!r}")
        limits[name] = queue_limit(options, f"LATER['QUEUE_LIMITS'][{name!r}]")
    return limits
