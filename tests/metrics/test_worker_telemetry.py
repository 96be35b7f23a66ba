"""The worker's Prometheus telemetry gathers claims, waits, outcomes and durations in
memory and writes them every ``WRITE_SECONDS`` from the loop's turn, and at exit."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from later_django.core import stages
from later_django.core.records import JobRecord
from later_django.engine.execution.values import Outcome, StartedJob
from later_django.worker import prometheus_export
from later_django.worker.prometheus_export import PrometheusTelemetry
from tests.engine import tasks
from tests.metrics.scrape import Samples, samples_of, value

RUNNING = JobRecord(
    job_id="01J0000000000000000000000A",
    namespace="default",
    task_path=tasks.add.module_path,
    args=[1, 2],
    kwargs={},
    queue_name="default",
    priority=0,
    backend="default",
    stage=stages.RUNNING,
    stage_at_ms=10_000,
    created_at_ms=9_000,
    ready_at_ms=9_500,
    worker_ids=["w1"],
)
SUCCEEDED = replace(RUNNING, stage=stages.SUCCESS)


def scrape(registry: CollectorRegistry) -> Samples:
    return samples_of(generate_latest(registry).decode())


def one_job_claimed_and_finished(telemetry: PrometheusTelemetry) -> None:
    started = StartedJob(record=RUNNING, task=tasks.add)
    telemetry.started([started], now_ms=10_000)
    telemetry.finished([Outcome(started, return_value=3, seconds=0.02)], [SUCCEEDED])


def test_figures_wait_for_the_next_write_then_are_all_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = CollectorRegistry()
    telemetry = PrometheusTelemetry(registry)
    # A long interval: the turn right after the job does not write.
    monkeypatch.setattr(prometheus_export, "WRITE_SECONDS", 3600.0)

    one_job_claimed_and_finished(telemetry)
    telemetry.threads(busy=0, total=4)

    held = scrape(registry)
    assert value(held, "later_jobs_total", task=tasks.add.module_path, queue="default",
                 outcome="success") is None  # fmt: skip
    assert value(held, "later_claimed_jobs_total", queue="default") is None

    monkeypatch.setattr(prometheus_export, "WRITE_SECONDS", 0.0)
    telemetry.threads(busy=0, total=4)

    written = scrape(registry)
    labels = {"task": tasks.add.module_path, "queue": "default"}
    assert value(written, "later_jobs_total", outcome="success", **labels) == 1
    assert value(written, "later_job_duration_seconds_count", **labels) == 1
    assert value(written, "later_job_duration_seconds_sum", **labels) == pytest.approx(0.02)
    assert value(written, "later_claimed_jobs_total", queue="default") == 1
    assert value(written, "later_job_wait_seconds_sum", queue="default") == pytest.approx(0.5)
    assert value(written, "later_worker_threads") == 4
    assert value(written, "later_worker_busy_threads") == 0


def test_flush_at_exit_writes_what_is_held_back(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = CollectorRegistry()
    telemetry = PrometheusTelemetry(registry)
    monkeypatch.setattr(prometheus_export, "WRITE_SECONDS", 3600.0)
    one_job_claimed_and_finished(telemetry)
    one_job_claimed_and_finished(telemetry)

    telemetry.flush()

    written = scrape(registry)
    assert value(written, "later_claimed_jobs_total", queue="default") == 2
    assert value(written, "later_jobs_total", task=tasks.add.module_path, queue="default",
                 outcome="success") == 2  # fmt: skip
    # Written once: a second flush adds nothing.
    telemetry.flush()
    assert value(scrape(registry), "later_claimed_jobs_total", queue="default") == 2


def test_a_scrape_in_the_middle_of_a_write_sees_the_gauges_before_the_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scrape reads the figures while a write goes on: when it already sees a turn's
    gauges it may miss that turn's counts (and wait for them), never the reverse, so a
    scrape that finds the last job counted finds its thread free."""
    registry = CollectorRegistry()
    telemetry = PrometheusTelemetry(registry)
    monkeypatch.setattr(prometheus_export, "WRITE_SECONDS", 0.0)
    telemetry.threads(busy=1, total=4)
    one_job_claimed_and_finished(telemetry)
    seen_before_the_count: list[Samples] = []
    real_labels = telemetry._jobs.labels

    def labels(*values: str):  # type: ignore[no-untyped-def]
        child = real_labels(*values)
        real_inc = child.inc

        def inc(amount: float = 1) -> None:
            seen_before_the_count.append(scrape(registry))
            real_inc(amount)

        child.inc = inc
        return child

    monkeypatch.setattr(telemetry._jobs, "labels", labels)
    telemetry.threads(busy=0, total=4)

    [during] = seen_before_the_count
    assert value(during, "later_worker_busy_threads") == 0
    assert value(scrape(registry), "later_jobs_total", task=tasks.add.module_path,
                 queue="default", outcome="success") == 1  # fmt: skip
