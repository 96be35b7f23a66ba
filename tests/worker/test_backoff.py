"""The database back-off of a worker: jittered, doubling delays, and one INFO line
once the database answers again (the reconnect an operator looks for)."""

from __future__ import annotations

import logging

import pytest

from later_django.worker.process import Backoff


def test_delays_double_from_a_tenth_of_a_second_up_to_five_with_jitter() -> None:
    backoff = Backoff()
    delays = [backoff.next() for _ in range(8)]
    for failures, delay in enumerate(delays, start=1):
        base = min(5.0, 0.1 * 2 ** (failures - 1))
        assert 0.8 * base <= delay <= 1.2 * base


def test_a_success_after_failures_logs_how_many_failed_and_for_how_long(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="later_django")
    backoff = Backoff()
    backoff.next()
    backoff.next()
    backoff.next()

    backoff.reset()

    [line] = caplog.records
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith("database answers again after 3 failed attempt(s) over ")
    assert (backoff.failures, backoff.failing_since) == (0, None)


def test_a_success_without_failures_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="later_django")
    backoff = Backoff()

    backoff.reset()
    backoff.next()
    backoff.reset()
    backoff.reset()

    assert [line.getMessage()[:30] for line in caplog.records] == ["database answers again after 1"]
