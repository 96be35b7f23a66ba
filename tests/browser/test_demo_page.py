"""The demo page in a real browser: seeded stage counts, and every button's jobs run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from tests.browser.example_site import MANAGE, example_environment, manage, poll, stop


def stage_count(page, stage: str) -> int:
    return int(page.inner_text(f"#stage-counts td[data-stage={stage}]"))


def test_the_demo_page_shows_the_seeded_jobs_in_their_stages_and_the_recurring_job(
    page, seeded_site
) -> None:
    page.goto(f"{seeded_site.base}/")
    counts = {
        stage: stage_count(page, stage)
        for stage in ("delayed", "enqueued", "running", "success", "failed")
    }
    statuses = set(page.locator("#recent-jobs td.status").all_inner_texts())
    # demo_seed's worker synced LATER["RECURRING"] when it started.
    recurring = page.inner_text("#recurring-jobs")
    assert "demo-heartbeat" in recurring and "* * * * *" in recurring
    assert "demo.tasks.heartbeat" in recurring
    assert counts == {"delayed": 15, "enqueued": 52, "running": 0, "success": 30, "failed": 5}
    assert statuses == {"READY", "SUCCESSFUL", "FAILED"}
    assert page.get_attribute("#dashboard-link", "href") == "/admin/"


def test_every_button_enqueues_jobs_that_a_worker_runs_to_success(
    page, empty_site, tmp_path
) -> None:
    base = empty_site.base
    page.goto(f"{base}/")
    expected = {"one": 1, "chain": 3, "flaky": 1, "burst": 1_000, "orders": 24}
    for name in expected:
        page.click(f"button[name={name}]")
        page.wait_for_selector(".messages li.success")
    waiting_before_any_worker = stage_count(page, "waiting")

    log = tmp_path / "worker.log"
    with log.open("w") as output:
        worker = subprocess.Popen(
            [sys.executable, str(MANAGE), "later_worker", "--concurrency", "4"],
            env=example_environment(empty_site.database),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def all_finished() -> bool:
            page.goto(f"{base}/")
            unfinished = ("delayed", "waiting", "enqueued", "running", "requeued")
            return not any(stage_count(page, stage) for stage in unfinished)

        # Generous: 1,029 jobs on SQLite on a machine shared with other test runs.
        poll(all_finished, f"the worker finishes {sum(expected.values())} jobs", 180)
        succeeded = stage_count(page, "success")
        statuses = page.locator("#recent-jobs td.status").all_inner_texts()
        flaky_outcome = page.inner_text("#recent-jobs tr:has(td:text-is('fails once'))")
    finally:
        worker_exit = stop(worker, signal.SIGTERM)
    assert waiting_before_any_worker == 2  # the chain's 2nd and 3rd steps
    assert stage_count(page, "failed") == 0
    # The recurring heartbeat adds one successful job a minute while the worker runs.
    assert sum(expected.values()) <= succeeded <= sum(expected.values()) + 3
    assert set(statuses) == {"SUCCESSFUL"}
    assert "succeeded on attempt 2" in flaky_outcome
    assert "after 1 failed attempt" in flaky_outcome
    assert orders_of_each_customer_ran_in_order(empty_site.database)
    assert worker_exit == 0, log.read_text()


ORDER_CHECK = """
import json
from later_django.compat.tasks import default_task_backend
from demo.models import DemoJob
started = {}
for job in DemoJob.objects.filter(label="order"):
    result = default_task_backend.get_result(job.job_id)
    order_id, customer = result.args
    started.setdefault(customer, []).append((order_id, result.started_at.isoformat()))
print(json.dumps(started))
"""


def orders_of_each_customer_ran_in_order(database) -> bool:
    """True when, per customer, the order jobs started in order-number order (they share
    a partition of topic "orders", which runs one job at a time in enqueue order)."""
    shown = manage(database, "shell", "-c", ORDER_CHECK)
    started = json.loads(shown.stdout.strip().splitlines()[-1])
    assert len(started) == 6 and sum(len(jobs) for jobs in started.values()) == 24
    return all(
        [start for _, start in sorted(jobs)] == sorted(start for _, start in jobs)
        for jobs in started.values()
    )
