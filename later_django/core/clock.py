"""Time as integer epoch milliseconds, the unit of every time column in later_* tables."""

from __future__ import annotations

import time

MINUTE_MS = 60_000


def now_ms() -> int:
    """The current wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def minute_bucket(epoch_ms: int) -> int:
    """The minute (since the epoch) that contains ``epoch_ms``; metric rows are keyed by it."""
    return epoch_ms // MINUTE_MS
