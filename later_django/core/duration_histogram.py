"""A fixed log-scale histogram of attempt durations, and quantiles read from it.

Bucket 0 holds durations below 1 ms. Bucket ``k`` (1 … :data:`LAST_BUCKET`) holds
``[2**((k-1)/4), 2**(k/4))`` ms: four buckets per doubling, up to ``2**27`` ms (37 h);
longer durations fall in the last bucket. :data:`NO_DURATION` marks a sample whose
duration is unknown (an attempt found lost by another worker): it is counted, never
placed in the histogram.

Error bound (decision 101): a quantile is read as the geometric middle of the bucket
holding the sample of that rank (nearest rank), and never above the largest duration
seen. For durations from 1 ms to ``2**27`` ms the value read is within
:data:`RELATIVE_ERROR` (``2**(1/8) - 1``, 9.05 %) of the true nearest-rank quantile;
below 1 ms it reads as :data:`BELOW_ONE_MS` (0.5 ms, within 0.5 ms).

Because every process uses the same buckets, histograms add: counts of one bucket
from any number of workers and minutes are summed by the database.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

BUCKETS_PER_DOUBLING = 4
#: Doublings above 1 ms the histogram resolves (``2**27`` ms is about 37 h).
DOUBLINGS = 27
LAST_BUCKET = BUCKETS_PER_DOUBLING * DOUBLINGS
#: The bucket of a sample with no known duration.
NO_DURATION = -1
#: The bound of a quantile's relative error for durations of 1 ms to ``2**27`` ms.
RELATIVE_ERROR = 2 ** (1 / (2 * BUCKETS_PER_DOUBLING)) - 1
#: What a quantile falling below 1 ms reads as.
BELOW_ONE_MS = 0.5


def bucket_of(duration_ms: float | None) -> int:
    """The bucket of ``duration_ms`` (:data:`NO_DURATION` for None; below 0 counts as 0)."""
    if duration_ms is None:
        return NO_DURATION
    if duration_ms < 1:
        return 0
    return min(LAST_BUCKET, math.floor(BUCKETS_PER_DOUBLING * math.log2(duration_ms)) + 1)


def bucket_bounds(bucket: int) -> tuple[float, float]:
    """``[low, high)`` ms of ``bucket`` (0 … :data:`LAST_BUCKET`); the last one's ``high``
    is where the resolved range ends, not a limit of what it holds."""
    if not 0 <= bucket <= LAST_BUCKET:
        raise ValueError(f"duration bucket {bucket} is outside 0 … {LAST_BUCKET}")
    if bucket == 0:
        return 0.0, 1.0
    return 2 ** ((bucket - 1) / BUCKETS_PER_DOUBLING), 2 ** (bucket / BUCKETS_PER_DOUBLING)


def quantile(counts: Mapping[int, int], q: float, max_ms: float) -> float | None:
    """The ``q`` quantile (0 < q ≤ 1, nearest rank) of the durations counted in
    ``counts`` (bucket -> count; :data:`NO_DURATION` and empty buckets ignored), at most
    ``max_ms`` (the largest duration seen); None when nothing is counted."""
    if not 0 < q <= 1:
        raise ValueError(f"quantile {q} is outside (0, 1]")
    timed = sorted((bucket, count) for bucket, count in counts.items() if bucket >= 0 and count > 0)
    total = sum(count for _, count in timed)
    if not total:
        return None
    rank = math.ceil(q * total)
    seen = 0
    for bucket, count in timed:
        seen += count
        if seen >= rank:
            return _reading(bucket, max_ms)
    raise AssertionError("the counts add up to the rank")  # pragma: no cover


def _reading(bucket: int, max_ms: float) -> float:
    """What a quantile falling in ``bucket`` reads as: its geometric middle, at most ``max_ms``."""
    if bucket == 0:
        return BELOW_ONE_MS
    low, high = bucket_bounds(bucket)
    return min(math.sqrt(low * high), max_ms)
