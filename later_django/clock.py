"""Time as integer epoch milliseconds, the unit of every time column in later_* tables."""

from __future__ import annotations

import time
from datetime import UTC, datetime

MINUTE_MS = 60_000


def now_ms() -> int:
    """The current wall-clock time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def to_datetime(epoch_ms: int) -> datetime:
    """An aware UTC datetime for ``epoch_ms``."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def from_datetime(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime; a naive one is refused."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{moment!r} is a naive datetime; pass an aware one (USE_TZ)")
    return int(moment.timestamp() * 1000)


def minute_bucket(epoch_ms: int) -> int:
    """The minute (since the epoch) that contains ``epoch_ms``; metric rows are keyed by it."""
    return epoch_ms // MINUTE_MS
