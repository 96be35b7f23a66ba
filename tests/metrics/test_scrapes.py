"""A known workload under a real ``later_worker --metrics-port``, then both outputs
scraped and parsed as Prometheus does, on both databases.

The workload, with one retry at once (``RETRY``: 1, immediate): N jobs succeed,
M fail at every attempt (retried once, then failed), K fail once then succeed;
one job waits on a queue no worker takes. The worker's port counts each attempt
by outcome, the view counts jobs by stage from the counters, and the stalled
queue's oldest-ready age grows between two scrapes. ``promtool check metrics``
passes on both outputs.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from later_django.compat.tasks import TaskResultStatus
from tests.browser.example_site import free_port
from tests.metrics.scrape import (
    Samples,
    http_get,
    promtool_problems,
    samples_of,
    total,
    value,
)
from tests.worker import tasks
from tests.worker.test_worker_process import (
    START_SECONDS,
    Workers,
    finished,
    status_of,
    wait_for,
    worker_rows,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

N_SUCCESS, M_FAILED, K_RETRIED = 5, 3, 2
ONE_RETRY_AT_ONCE = {"RETRY": {"max_retries": 1, "backoff": "immediate"}}
RECORD = "tests.worker.tasks.record"
FAIL_ALWAYS = "tests.worker.tasks.fail_always"
FAIL_ONCE = "tests.worker.tasks.fail_on_first_attempt"
#: Attempts per outcome on the worker's port: (task, outcome) -> count.
EXPECTED_ATTEMPTS = {
    (RECORD, "success"): N_SUCCESS,
    (FAIL_ALWAYS, "retried"): M_FAILED,
    (FAIL_ALWAYS, "failed"): M_FAILED,
    (FAIL_ONCE, "retried"): K_RETRIED,
    (FAIL_ONCE, "success"): K_RETRIED,
}
ATTEMPTS = sum(EXPECTED_ATTEMPTS.values())


def run_workload(lines: Path) -> list:
    """Enqueues the workload; returns the results of the jobs a worker of ``default`` runs."""
    results = [tasks.record.enqueue(str(lines), f"ok-{n}") for n in range(N_SUCCESS)]
    results += [tasks.fail_always.enqueue(str(lines), f"bad-{n}") for n in range(M_FAILED)]
    results += [
        tasks.fail_on_first_attempt.enqueue(str(lines), f"once-{n}") for n in range(K_RETRIED)
    ]
    tasks.record.using(queue_name="emails").enqueue(str(lines), "stalled")
    return results


def scrape_port(port: int) -> str:
    return http_get(f"http://127.0.0.1:{port}/metrics")


def port_samples_once_counted(port: int, workers: Workers) -> Samples:
    """The port's samples once every attempt is counted (a worker writes its figures
    at most a second after the outcomes, so a scrape may come before)."""

    def counted() -> Samples | None:
        samples = samples_of(scrape_port(port))
        # Both families: a process's attempt counts and its duration histogram reach
        # the scrape by separate writes, so one may show every attempt before the other.
        complete = all(
            total(samples, family) >= ATTEMPTS
            for family in ("later_jobs_total", "later_job_duration_seconds_count")
        )
        return samples if complete else None

    return wait_for(counted, 10, "every attempt counted on the metrics port", workers)


def assert_attempts_counted(samples: Samples, processes: int, concurrency: int) -> None:
    for (task, outcome), count in EXPECTED_ATTEMPTS.items():
        counted = value(samples, "later_jobs_total", task=task, queue="default", outcome=outcome)
        assert counted == count, (task, outcome, counted)
    assert total(samples, "later_jobs_total") == ATTEMPTS
    runs = {RECORD: N_SUCCESS, FAIL_ALWAYS: 2 * M_FAILED, FAIL_ONCE: 2 * K_RETRIED}
    for task, attempts in runs.items():
        observed = value(samples, "later_job_duration_seconds_count", task=task, queue="default")
        assert observed == attempts, (task, observed)
    assert value(samples, "later_job_wait_seconds_count", queue="default") == ATTEMPTS
    assert value(samples, "later_claimed_jobs_total", queue="default") == ATTEMPTS
    assert value(samples, "later_worker_threads") == processes * concurrency
    assert value(samples, "later_worker_busy_threads") == 0
    assert total(samples, "later_lease_losses_total") == 0
    # Nothing about the stalled queue: this worker never took it.
    assert total(samples, "later_jobs_total", queue="emails") == 0


def staff_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_user("metrics", password="x", is_staff=True))
    return client


def scrape_view(client: Client) -> str:
    response = client.get("/later/metrics")
    assert response.status_code == 200
    return response.content.decode()


def test_the_port_and_the_view_count_a_known_workload(
    alias: str, workers: Workers, lines: Path
) -> None:
    port = free_port()
    concurrency = 4
    worker = workers.start(
        alias,
        "--queue",
        "default",
        "--concurrency",
        str(concurrency),
        "--metrics-port",
        str(port),
        later=ONE_RETRY_AT_ONCE,
    )
    results = run_workload(lines)
    wait_for(lambda: all(finished(r) for r in results), START_SECONDS, "workload done", workers)
    statuses = [status_of(result) for result in results]
    assert statuses.count(TaskResultStatus.SUCCESSFUL) == N_SUCCESS + K_RETRIED
    assert statuses.count(TaskResultStatus.FAILED) == M_FAILED

    port_text = scrape_port(port)
    port_samples = port_samples_once_counted(port, workers)
    assert_attempts_counted(port_samples, processes=1, concurrency=concurrency)
    assert value(port_samples, "later_database_errors_total") == 0
    assert promtool_problems(port_text) == ""

    client = staff_client()
    # The heartbeat row says who is live and busy: wait for the beat after the work.
    wait_for(lambda: worker_rows(alias), START_SECONDS, "the worker's row", workers)
    first_text = scrape_view(client)
    first = samples_of(first_text)
    in_stage = {
        stage: value(first, "later_jobs_in_stage", namespace="default", stage=stage)
        for stage in ("success", "failed", "enqueued", "running")
    }
    assert in_stage == {
        "success": N_SUCCESS + K_RETRIED,
        "failed": M_FAILED,
        "enqueued": 1,
        "running": 0,
    }
    assert value(first, "later_queue_ready_jobs", namespace="default", queue="emails") == 1
    assert value(first, "later_queue_ready_jobs", namespace="default", queue="default") == 0
    assert value(first, "later_workers_live", namespace="default") == 1
    assert value(first, "later_workers_threads", namespace="default") == concurrency
    assert value(first, "later_queue_paused", namespace="default", queue="emails") == 0
    stalled_age = value(
        first, "later_queue_oldest_ready_age_seconds", namespace="default", queue="emails"
    )
    assert stalled_age is not None and stalled_age > 0
    assert promtool_problems(first_text) == ""

    time.sleep(1.5)
    later = samples_of(scrape_view(client))
    grown = value(
        later, "later_queue_oldest_ready_age_seconds", namespace="default", queue="emails"
    )
    assert grown is not None and grown >= stalled_age + 1.0, (stalled_age, grown)
    assert (
        value(later, "later_queue_oldest_ready_age_seconds", namespace="default", queue="default")
        == 0
    )

    worker.send(signal.SIGTERM)
    assert worker.wait_exit(20) == 0, worker.describe()


def test_a_supervisor_serves_its_childrens_figures_summed(
    alias: str, workers: Workers, lines: Path
) -> None:
    port = free_port()
    supervisor = workers.start(
        alias,
        "--processes",
        "2",
        "--concurrency",
        "2",
        "--queue",
        "default",
        "--metrics-port",
        str(port),
        later=ONE_RETRY_AT_ONCE,
    )
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two children", workers)
    results = run_workload(lines)
    wait_for(lambda: all(finished(r) for r in results), START_SECONDS, "workload done", workers)
    samples = port_samples_once_counted(port, workers)
    assert_attempts_counted(samples, processes=2, concurrency=2)
    assert promtool_problems(scrape_port(port)) == ""

    # A child killed: its counts stay in the sums; its threads leave the gauge and
    # its replacement's join it (2 children x 2 threads again).
    before = {row["pid"] for row in worker_rows(alias)}
    os.kill(next(iter(before)), signal.SIGKILL)
    wait_for(
        lambda: (
            {row["pid"] for row in worker_rows(alias)} - before
            and value(samples_of(scrape_port(port)), "later_worker_threads") == 4
        ),
        START_SECONDS,
        "a replacement child counted",
        workers,
    )
    after = samples_of(scrape_port(port))
    assert total(after, "later_jobs_total") == ATTEMPTS
    supervisor.send(signal.SIGTERM)
    assert supervisor.wait_exit(30) == 0, supervisor.describe()
