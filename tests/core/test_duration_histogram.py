"""The duration histogram: fixed log-scale buckets, and quantiles within the stated bound."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from later_django.core.duration_histogram import (
    BELOW_ONE_MS,
    LAST_BUCKET,
    NO_DURATION,
    RELATIVE_ERROR,
    bucket_bounds,
    bucket_of,
    quantile,
)


def exact_quantile(durations: list[float], q: float) -> float:
    """The nearest-rank quantile: the smallest duration with at least ``q`` of them at or below."""
    ordered = sorted(durations)
    return ordered[math.ceil(q * len(ordered)) - 1]


def test_the_bound_is_an_eighth_of_a_doubling() -> None:
    assert pytest.approx(2 ** (1 / 8) - 1) == RELATIVE_ERROR
    assert 0.090 < RELATIVE_ERROR < 0.091


@pytest.mark.parametrize(
    ("duration_ms", "bucket"),
    [(None, NO_DURATION), (-5, 0), (0, 0), (0.99, 0), (1, 1), (1.18, 1), (1.19, 2), (2, 5)],
)
def test_durations_fall_in_their_bucket(duration_ms: float | None, bucket: int) -> None:
    assert bucket_of(duration_ms) == bucket


def test_every_bucket_holds_what_its_bounds_say_and_the_last_holds_the_rest() -> None:
    for bucket in range(1, LAST_BUCKET + 1):
        low, high = bucket_bounds(bucket)
        assert high / low == pytest.approx(2**0.25)
        assert bucket_of(low * 1.0001) == bucket
        assert bucket_of(high * 0.9999) == bucket
    assert bucket_of(10**12) == LAST_BUCKET
    with pytest.raises(ValueError, match=r"duration bucket 109 is outside 0 … 108"):
        bucket_bounds(LAST_BUCKET + 1)


@pytest.mark.parametrize("seed", range(5))
def test_quantiles_read_from_the_buckets_are_within_the_bound(seed: int) -> None:
    chance = random.Random(seed)
    durations = [math.exp(chance.uniform(0, math.log(3_600_000))) for _ in range(2_000)]
    counts = Counter(bucket_of(duration) for duration in durations)
    for q in (0.5, 0.95, 0.99, 1.0):
        exact = exact_quantile(durations, q)
        read = quantile(counts, q, max(durations))
        assert read is not None
        assert abs(read - exact) <= RELATIVE_ERROR * exact, (q, read, exact)


def test_a_quantile_is_never_above_the_max_and_sub_millisecond_reads_half_a_millisecond() -> None:
    assert quantile({bucket_of(91): 3}, 0.5, 91) == 91  # the bucket's middle is 98.7
    assert quantile({0: 9, bucket_of(50): 1}, 0.5, 50) == BELOW_ONE_MS
    assert quantile({0: 9, bucket_of(50): 1}, 0.95, 50) == pytest.approx(50, rel=RELATIVE_ERROR)


def test_unknown_durations_and_empty_histograms_have_no_quantile() -> None:
    assert quantile({}, 0.5, 0) is None
    assert quantile({NO_DURATION: 4}, 0.5, 0) is None
    assert quantile({NO_DURATION: 100, bucket_of(10): 1}, 0.5, 10) == pytest.approx(
        10, rel=RELATIVE_ERROR
    )
    with pytest.raises(ValueError, match=r"quantile 0 is outside \(0, 1\]"):
        quantile({1: 1}, 0, 1)
