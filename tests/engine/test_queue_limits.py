"""Queue limits in one process, on both databases: the setting and its errors, the
limited claim (slots taken and given back, a rate window), a dead holder's slot
lapsing, and a burst worker that runs a limited queue. Limits across real worker
processes are in ``tests/worker/test_limit_workers.py``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from later_django.conf import later_settings
from later_django.core.limits import QueueLimit, parse_rate
from later_django.engine.queue_limits import claim_limited, release_slots
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import result, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

NS = "limits_ns"


@pytest.fixture
def later(db_alias: str) -> Iterator[str]:
    with override_settings(LATER={"NAMESPACE": NS, "DATABASE": db_alias}):
        yield db_alias


def publish(alias: str, count: int, queue_name: str = "emails") -> None:
    stores_for(alias).queue.publish(NS, queue_name, [b"m"] * count)


def claim(alias: str, owner: str, limit: QueueLimit, wanted: int = 16, lease_ms: int = 30_000):  # type: ignore[no-untyped-def]
    return claim_limited(stores_for(alias), NS, owner, "emails", limit, wanted, lease_ms)


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"emails": {"concurrency": 0}}, "['concurrency'] must be an integer from 1"),
        ({"emails": {"rate": "100 per minute"}}, "'<count>/<window>'"),
        ({"emails": {"rate": "0/60s"}}, "the count must be 1 to"),
        ({"emails": {"speed": 3}}, "unknown key(s) ['speed']"),
        ({"emails": {}}, "must be a dict with 'concurrency' and/or 'rate'"),
    ],
)
def test_a_bad_limit_is_refused_naming_the_queue_and_the_rule(raw, named) -> None:
    with (
        override_settings(LATER={"QUEUE_LIMITS": raw}),
        pytest.raises(ImproperlyConfigured) as raised,
    ):
        later_settings()
    assert "LATER['QUEUE_LIMITS']['emails']" in str(raised.value)
    assert named in str(raised.value)


def test_rates_read_in_seconds_minutes_and_hours() -> None:
    assert parse_rate("100/60s", "r") == (100, 60_000)
    assert parse_rate("5 / 1.5m", "r") == (5, 90_000)
    assert parse_rate("1/1h", "r") == (1, 3_600_000)


def test_a_concurrency_limit_hands_out_at_most_its_slots(later: str) -> None:
    publish(later, 10)
    limit = QueueLimit(concurrency=3)
    first = claim(later, "w1", limit, wanted=2)
    assert len(first.messages) == len(first.slots) == 2
    second = claim(later, "w2", limit)
    assert len(second.messages) == 1  # one slot was left
    assert claim(later, "w1", limit).messages == []
    release_slots(stores_for(later), "w1", [first.slots[0][0]])
    again = claim(later, "w2", limit)
    assert len(again.messages) == 1
    # Slot keys are distinct: three running jobs, three slots.
    assert len({key for key, _ in first.slots + second.slots}) == 3


def test_a_dead_holders_slot_lapses_with_its_lease(later: str) -> None:
    publish(later, 3)
    limit = QueueLimit(concurrency=1)
    assert len(claim(later, "dead", limit, lease_ms=200).messages) == 1
    assert claim(later, "alive", limit).messages == []
    time.sleep(0.3)
    taken = claim(later, "alive", limit)
    assert len(taken.messages) == 1
    assert taken.slots[0][1] == 2  # the epoch rose: a new holder


def test_a_rate_limit_counts_claims_in_a_sliding_window(later: str) -> None:
    publish(later, 10)
    limit = QueueLimit(rate_count=3, rate_window_ms=400)
    assert len(claim(later, "w1", limit, wanted=2).messages) == 2
    assert len(claim(later, "w2", limit, wanted=5).messages) == 1
    assert claim(later, "w1", limit).messages == []
    time.sleep(0.45)
    assert len(claim(later, "w1", limit, wanted=5).messages) == 3


def test_a_burst_worker_runs_a_limited_queue_and_gives_its_slots_back(
    db_alias: str, tmp_path
) -> None:
    later = {
        "NAMESPACE": "default",
        "DATABASE": db_alias,
        "QUEUE_LIMITS": {"emails": {"concurrency": 2, "rate": "1000/1s"}},
    }
    with override_settings(LATER=later):
        jobs = [tasks.add_on_emails.enqueue(n, n) for n in range(7)]
        plain = tasks.add.enqueue(1, 1)
        run_burst(queues=("default", "emails"))
        assert [result(job.id).return_value for job in jobs] == [2 * n for n in range(7)]
        assert result(plain.id).return_value == 2
        stores = stores_for(db_alias)
        # Every slot given back: the next claim may take both.
        stores.queue.publish("default", "emails", [b"m"] * 2)
        limit = QueueLimit(concurrency=2)
        taken = claim_limited(stores, "default", "someone", "emails", limit, 5, 30_000)
        assert len(taken.slots) == 2
