"""Partitions with real ``later_worker`` processes: per-key order, sharing, failover.

Workers run with ``LATER["TOPICS"] = {"orders": {"partitions": 8}}`` (passed as
JSON in ``LATER_WORKER_LATER``, see ``tests/worker/worker_settings.py``) and a
short lease (``--lease-seconds 3``) so that failover is quick.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from later_django.compat.tasks import TaskResult
from later_django.core import rendezvous
from later_django.core.clock import now_ms
from later_django.engine import metrics
from tests.partitions import tasks
from tests.partitions.conftest import NAMESPACE, TOPIC, TOPICS
from tests.partitions.support import fetch
from tests.worker.test_worker_process import WorkerProcess, Workers, later_on, wait_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

WORKER_LATER = {"TOPICS": TOPICS}
START_SECONDS = 60.0


@pytest.fixture
def alias(db_alias: str) -> Iterator[str]:
    from django.test import override_settings

    with (
        later_on(db_alias),
        override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": db_alias, "TOPICS": TOPICS}),
    ):
        yield db_alias
        metrics.flush()


def enqueue_keyed(task, path: str, calls: list[tuple[str, int]]) -> list[TaskResult]:  # type: ignore[no-untyped-def]
    """One batch: a job of ``task(path, key, n)`` per ``(key, n)`` on ``orders``."""
    backend = task.get_backend()
    jobs = [
        dataclasses.replace(
            backend.new_job(task, [path, key, n], {}), topic=TOPIC, partition_key=key
        )
        for key, n in calls
    ]
    return backend.write_jobs([task] * len(jobs), jobs)


def owners(alias: str) -> dict[str, int]:
    """Live lease owner -> how many partitions of ``orders`` it holds."""
    rows = fetch(
        alias,
        "SELECT owner, COUNT(*) FROM later_partition_lease WHERE namespace = %s AND topic = %s "
        "AND owner IS NOT NULL AND lease_until > %s GROUP BY owner",
        [NAMESPACE, TOPIC, now_ms()],
    )
    return dict(rows)


def leases(alias: str) -> dict[tuple[str, int], str]:
    """(topic, partition) -> live lease owner, every topic of the namespace."""
    rows = fetch(
        alias,
        "SELECT topic, partition_id, owner FROM later_partition_lease WHERE namespace = %s "
        "AND owner IS NOT NULL AND lease_until > %s",
        [NAMESPACE, now_ms()],
    )
    return {(topic, int(partition)): owner for topic, partition, owner in rows}


def live_workers(alias: str) -> list[str]:
    """Ids of the workers whose heartbeat is recent."""
    rows = fetch(
        alias,
        "SELECT worker_id FROM later_worker WHERE namespace = %s AND heartbeat_at > %s",
        [NAMESPACE, now_ms() - 5000],
    )
    return [worker_id for (worker_id,) in rows]


def finished_count(alias: str) -> int:
    return fetch(
        alias,
        "SELECT COUNT(*) FROM later_jobs_index WHERE namespace = %s AND stage = 'success'",
        [NAMESPACE],
    )[0][0]


def collapse(values: list[int]) -> list[int]:
    """``values`` with runs of one value folded (a lost attempt runs again at once)."""
    return [value for i, value in enumerate(values) if i == 0 or values[i - 1] != value]


#: Attempts at a pair of workers that share the topic's partitions (see start_two).
PAIR_ATTEMPTS = 5
#: Seconds two live workers take to settle their rendezvous preference.
SETTLE_SECONDS = 10.0


def start_two(workers: Workers, alias: str) -> list:  # type: ignore[type-arg]
    """Two workers that both hold some of the topic's 8 partitions.

    Rendezvous hashing over two random worker ids gives all 8 to one of them once
    in 128 pairs; then that worker is replaced by a new one (a new id), up to
    PAIR_ATTEMPTS times."""

    def start() -> WorkerProcess:
        return workers.start(
            alias, "--concurrency", "4", "--lease-seconds", "3", later=WORKER_LATER
        )

    started = [start(), start()]
    wait_for(
        lambda: sum(owners(alias).values()) == 8 and len(live_workers(alias)) == 2,
        START_SECONDS,
        "two live workers holding every partition of orders",
        workers,
    )
    for _ in range(PAIR_ATTEMPTS):
        try:
            wait_for(
                lambda: len(owners(alias)) == 2 and sum(owners(alias).values()) == 8,
                SETTLE_SECONDS,
                "both workers holding partitions of orders",
                workers,
            )
            return started
        except pytest.fail.Exception:
            (lone,) = owners(alias)
        index = next(i for i, w in enumerate(started) if f":{w.pid}:" in lone)
        started[index].send(signal.SIGTERM)
        assert started[index].wait_exit(30) == 0, started[index].describe()
        started[index] = start()
    pytest.fail(f"no pair of workers shared the partitions in {PAIR_ATTEMPTS} tries")


def test_1000_jobs_over_50_keys_run_in_enqueue_order_per_key_on_two_workers(
    alias: str, workers: Workers, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines.jsonl")
    started = start_two(workers, alias)
    keys = [f"key-{k}" for k in range(50)]
    calls = [(key, n) for n in range(20) for key in keys]
    enqueue_keyed(tasks.record_key, path, calls)

    wait_for(lambda: finished_count(alias) == 1000, 120, "1000 jobs finished", workers)

    lines = tasks.read_lines(path)
    assert len(lines) == 1000, "each job ran exactly once"
    for key in keys:
        assert [line["n"] for line in lines if line["key"] == key] == list(range(20)), key
    pids = {line["pid"] for line in lines}
    assert pids == {worker.pid for worker in started}, "both workers did work"
    # Each key ran on one process at a time: one partition, one runner.
    assert fetch(alias, "SELECT COUNT(*) FROM later_partition_job")[0][0] == 0
    assert fetch(alias, "SELECT COUNT(*) FROM later_partition_head")[0][0] == 0


def test_a_killed_workers_partitions_are_taken_over_in_order(
    alias: str, workers: Workers, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines.jsonl")
    first, second = start_two(workers, alias)
    keys = [f"key-{k}" for k in range(16)]
    calls = [(key, n) for n in range(25) for key in keys]
    task = tasks.slow_record_key
    backend = task.get_backend()
    jobs = [
        dataclasses.replace(
            backend.new_job(task, [path, key, n, 0.05], {}), topic=TOPIC, partition_key=key
        )
        for key, n in calls
    ]
    backend.write_jobs([task] * len(jobs), jobs)

    wait_for(
        lambda: {line["pid"] for line in tasks.read_lines(path)} == {first.pid, second.pid},
        START_SECONDS,
        "both workers running jobs",
        workers,
    )
    keys_of_first = {line["key"] for line in tasks.read_lines(path) if line["pid"] == first.pid}
    os.kill(first.pid, signal.SIGKILL)
    first.process.wait(10)
    killed_at = time.time()

    wait_for(lambda: finished_count(alias) == len(calls), 120, "all jobs finished", workers)

    lines = tasks.read_lines(path)
    for key in keys:
        starts = [line["n"] for line in lines if line["key"] == key and line["event"] == "start"]
        # In order; a job cut short by the kill may start again (at-least-once).
        assert collapse(starts) == list(range(25)), (key, starts)
    taken_over = {
        line["key"] for line in lines if line["pid"] == second.pid and line["at"] > killed_at
    }
    assert keys_of_first & taken_over, "the survivor took over the killed worker's partitions"
    assert list(owners(alias).values()) == [8], "the survivor holds every partition"
    ended = {line["n"] for line in lines if line["event"] == "end"}
    assert ended == set(range(25))
    statuses = fetch(
        alias,
        "SELECT stage, COUNT(*) FROM later_jobs_index WHERE namespace = %s GROUP BY stage",
        [NAMESPACE],
    )
    assert statuses == [("success", len(calls))]


def test_a_newly_started_worker_gets_its_share_of_the_partitions(
    alias: str, workers: Workers
) -> None:
    options = ("--concurrency", "2", "--lease-seconds", "3")
    first = workers.start(alias, *options, later=WORKER_LATER)
    wait_for(
        lambda: list(owners(alias).values()) == [8],
        START_SECONDS,
        "the only worker holding all 8 partitions",
        workers,
    )
    workers.start(alias, *options, later=WORKER_LATER)

    def shared_as_preferred() -> bool:
        """Both workers live and holding partitions, every partition of ``orders``
        held, and every held partition (of any topic) held by its rendezvous owner
        among the two. Which worker that is depends on the workers' random ids: all 8
        partitions of ``orders`` go to one of them in 2 runs of 256 (this test once
        failed so), so the share is checked against the preference, not as "both hold
        some of ``orders``"; over the namespace's partitions (the internal topic's
        too) each worker holds some but in 2**-23 of runs."""
        live, held = live_workers(alias), leases(alias)
        return (
            len(live) == 2
            and set(held.values()) == set(live)
            and sum(1 for topic, _ in held if topic == TOPIC) == 8
            and all(owner == rendezvous.owner(live, *key) for key, owner in held.items())
        )

    wait_for(shared_as_preferred, START_SECONDS, "the partitions shared by preference", workers)
    first.send(signal.SIGTERM)
    assert first.wait_exit(30) == 0
    # A graceful exit releases the leases at once: the survivor takes them all
    # without waiting for them to lapse.
    wait_for(
        lambda: list(owners(alias).values()) == [8],
        10,
        "the survivor holding all 8 partitions",
        workers,
    )
