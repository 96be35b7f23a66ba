"""Recurring jobs with real ``later_worker`` processes (two at once, as in production).

The workers get ``LATER["RECURRING"]`` through :mod:`tests.worker.worker_settings`
(``LATER_WORKER_LATER``) and sync it when they start; their maintenance loop runs
the ``recurring`` pass (one process at a time by its lease, and the definition's
row lock makes a second one harmless). The tasks of :mod:`tests.recurring.tasks`
write one line per occurrence with its tick.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from later_django.core.clock import now_ms
from later_django.core.topics import RECURRING_TOPIC
from later_django.engine.recurring_schedule import next_tick_ms
from tests.recurring.support import definition, move_next_run, occurrences
from tests.worker.tasks import read_lines
from tests.worker.test_worker_process import START_SECONDS, Workers, wait_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

DAY_MS = 86_400_000


def stop(workers: Workers) -> None:
    """SIGTERM to every worker; each must exit 0 within 30 s."""
    for worker in workers.started:
        if worker.alive():
            worker.send(signal.SIGTERM)
    for worker in workers.started:
        assert worker.wait_exit(30) == 0, worker.describe()


def recurring_settings(recurring_id: str, **entry: object) -> dict[str, object]:
    return {"RECURRING": {recurring_id: entry}}


def test_two_workers_enqueue_each_per_second_tick_exactly_once(
    alias: str, workers: Workers, tmp_path: Path
) -> None:
    path = str(tmp_path / "ticks")
    later = recurring_settings(
        "every-second",
        cron="* * * * * *",
        task="tests.recurring.tasks.record_tick",
        args=[path, "tick"],
    )
    for _ in range(2):
        workers.start(alias, "--concurrency", "4", later=later)

    def five_seconds_of_runs() -> bool:
        ticks = {line["tick"] for line in read_lines(path)}
        return len(ticks) >= 2 and max(ticks) - min(ticks) >= 5_000

    wait_for(five_seconds_of_runs, START_SECONDS + 30, "5 s of per-second occurrences", workers)
    stop(workers)

    records = occurrences(alias, "every-second")
    ticks = sorted(record.run_after_ms for record in records)
    assert len(ticks) == len(set(ticks)), Counter(ticks).most_common(3)  # no tick twice
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 1000)), ticks  # no gap
    lines = read_lines(path)
    ran = [line["job_id"] for line in lines]
    assert len(ran) == len(set(ran))  # no occurrence ran twice
    assert {line["tick"] for line in lines} <= set(ticks)
    assert len({line["pid"] for line in lines}) >= 1
    stored = definition(alias, "every-second")
    assert stored.last_run_ms == ticks[-1] and stored.next_run_ms == ticks[-1] + 1000


def test_sequential_occurrences_never_overlap(alias: str, workers: Workers, tmp_path: Path) -> None:
    path = str(tmp_path / "runs")
    later = recurring_settings(
        "slow",
        cron="* * * * * *",
        task="tests.recurring.tasks.slow_tick",
        args=[path, 1.5],  # each run outlasts the one-second period
        sequential=True,
    )
    for _ in range(2):
        workers.start(alias, "--concurrency", "4", later=later)

    def four_finished() -> bool:
        return sum(line["event"] == "end" for line in read_lines(path)) >= 4

    wait_for(four_finished, START_SECONDS + 40, "4 finished sequential occurrences", workers)
    stop(workers)

    runs: dict[str, dict[str, float]] = {}
    for line in read_lines(path):
        runs.setdefault(line["job_id"], {})[line["event"]] = line["at"]
        assert line["topic"] == RECURRING_TOPIC
    intervals = sorted((run["start"], run.get("end", float("inf"))) for run in runs.values())
    for (_, end), (next_start, _) in itertools.pairwise(intervals):
        assert next_start >= end, intervals
    ticks = [record.run_after_ms for record in occurrences(alias, "slow")]
    assert len(ticks) == len(set(ticks))


def test_a_restart_after_downtime_runs_exactly_one_catch_up(
    alias: str, workers: Workers, tmp_path: Path
) -> None:
    path = str(tmp_path / "ticks")
    # A daily tick twelve hours away from now: no tick falls inside this test.
    hour = (datetime.now(UTC).hour + 12) % 24
    cron = f"0 {hour} * * *"
    later = recurring_settings(
        "daily", cron=cron, task="tests.recurring.tasks.record_tick", args=[path, "daily"]
    )
    first = workers.start(alias, "--burst", later=later)
    assert first.wait_exit(START_SECONDS) == 0, first.describe()
    synced = definition(alias, "daily")
    assert synced is not None and synced.last_run_ms is None
    assert occurrences(alias, "daily") == []

    # Everything was down for three days: the schedule still says "three days ago".
    missed_since = synced.next_run_ms - 3 * DAY_MS
    move_next_run(alias, "daily", missed_since)
    for _ in range(2):
        workers.start(alias, later=later)

    wait_for(lambda: read_lines(path), START_SECONDS + 30, "the catch-up occurrence", workers)
    time.sleep(3.0)  # several pass intervals: a second occurrence would show up here
    stop(workers)

    [catch_up] = occurrences(alias, "daily")
    assert [line["job_id"] for line in read_lines(path)] == [catch_up.job_id]
    assert missed_since < catch_up.run_after_ms <= now_ms()
    after = definition(alias, "daily")
    assert after.last_run_ms == catch_up.run_after_ms
    assert after.next_run_ms == next_tick_ms(cron, "UTC", catch_up.run_after_ms)
