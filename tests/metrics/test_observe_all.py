"""``observe_all``: a batch of observations written once per bucket gives exactly the
samples that observing each value one by one gives."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from later_django.core.metric_names import DURATION_BUCKETS
from later_django.worker.prometheus_export import observe_all

#: Values on, between, below and above the bounds (the last beyond every finite one).
AMOUNTS = [0.0, 0.005, 0.0051, 0.001, 0.3, 0.25, 2.5, 1800.0, 1800.5, 99999.0, 0.3, 0.004]


def exposition(fill) -> list[str]:  # type: ignore[no-untyped-def]
    """The text lines of a fresh histogram filled by ``fill(child)``, without the
    ``_created`` timestamps (they differ between two histograms by nature)."""
    registry = CollectorRegistry()
    histogram = Histogram(
        "later_probe_seconds", "probe", ["queue"], registry=registry, buckets=DURATION_BUCKETS
    )
    fill(histogram.labels("default"))
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if "_created" not in line]


def test_a_batch_gives_the_samples_of_one_observe_per_value() -> None:
    one_by_one = exposition(lambda child: [child.observe(amount) for amount in AMOUNTS])
    batched = exposition(lambda child: observe_all(child, AMOUNTS))

    # The sum is added once rather than value by value: equal up to rounding.
    assert [line for line in batched if "_sum" not in line] == [
        line for line in one_by_one if "_sum" not in line
    ]
    [batched_sum] = [line for line in batched if line.startswith("later_probe_seconds_sum")]
    [single_sum] = [line for line in one_by_one if line.startswith("later_probe_seconds_sum")]
    assert float(batched_sum.split()[-1]) == pytest.approx(float(single_sum.split()[-1]))
    assert 'later_probe_seconds_count{queue="default"} 12.0' in batched
    assert 'later_probe_seconds_bucket{le="+Inf",queue="default"} 12.0' in batched
    assert 'later_probe_seconds_bucket{le="0.005",queue="default"} 4.0' in batched


def test_an_empty_batch_writes_nothing() -> None:
    assert exposition(lambda child: observe_all(child, [])) == exposition(lambda child: None)


class PlainObserver:
    """A histogram-like object without prometheus-client's bucket layout."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def observe(self, amount: float) -> None:
        self.seen.append(amount)


@pytest.mark.parametrize("amounts", [[0.1], [0.2, 3.0, 0.2]])
def test_a_histogram_laid_out_otherwise_is_observed_value_by_value(amounts: list[float]) -> None:
    histogram = PlainObserver()

    observe_all(histogram, amounts)

    assert histogram.seen == amounts
