"""The task and failure pages: figures from ``later_task_minute`` after real jobs ran
(a burst worker in this process), failure groups with their newest job's traceback and
links, ranges, staff only, and everything a task or an error wrote escaped."""

from __future__ import annotations

import html as html_module
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from later_django.core.clock import MINUTE_MS, now_ms
from later_django.core.duration_histogram import bucket_of
from later_django.engine import metrics
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexMetricsBatch, TaskMinuteSample
from tests.admin.support import SCRIPT
from tests.engine import give_up_tasks, tasks
from tests.engine.support import run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

TASKS_URL = reverse("later_django:task_list")
FAILURES_URL = reverse("later_django:failure_list")
ADD = tasks.add.module_path
FAILING = tasks.fail_once_without_retry.module_path
BOOM = f"{tasks.Boom.__module__}.{tasks.Boom.__qualname__}"
HOUR_MS = 60 * MINUTE_MS


def run_jobs() -> list[str]:
    """3 successes and 2 failures (no retry; the second one's message is a ``<script>``
    tag), run by a real worker; the metrics flushed. Returns the failed jobs' ids."""
    succeeded = [tasks.add.enqueue(n, 1).id for n in range(3)]
    failed = [tasks.fail_once_without_retry.enqueue("broke").id]
    time.sleep(0.002)  # a later millisecond: a higher ULID, the newer job
    failed.append(tasks.fail_once_without_retry.enqueue(SCRIPT).id)
    run_until_finished(succeeded + failed)
    metrics.flush()
    return failed


def record(alias: str, *samples: TaskMinuteSample) -> None:
    stores_for(alias).metrics.record_batch("default", JobIndexMetricsBatch(task_minutes=[*samples]))


def utc_minute(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms // 1000, UTC).strftime("%Y-%m-%d %H:%M")


def row_cells(page: str, row_class: str, text: str) -> dict[str, str]:
    """The cells (by their ``later-…`` class) of the one ``row_class`` row containing ``text``."""
    rows = re.findall(rf'<tr class="{row_class}">(.*?)</tr>', page, re.S)
    mine = [row for row in rows if text in row]
    assert len(mine) == 1, f"{len(mine)} rows with {text!r} in {rows}"
    cells = re.findall(r'<td class="(?:num )?(later-[\w-]+)">(.*?)</td>', mine[0], re.S)
    return {name: html_module.unescape(re.sub(r"<[^>]+>", "", value)) for name, value in cells}


def test_the_task_list_shows_each_tasks_attempts_by_outcome_rate_and_durations(
    viewer_client: Client, later_db: str
) -> None:
    run_jobs()

    page = viewer_client.get(TASKS_URL).content.decode()

    add = row_cells(page, "later-task", f"<code>{ADD}</code>")
    assert (add["later-attempts"], add["later-outcome-succeeded"]) == ("3", "3")
    assert (add["later-outcome-failed"], add["later-failure-rate"]) == ("0", "0 %")
    assert add["later-p50"] and add["later-p50"] != "\N{EN DASH}"
    failing = row_cells(page, "later-task", f"<code>{FAILING}</code>")
    assert (failing["later-attempts"], failing["later-outcome-failed"]) == ("2", "2")
    assert failing["later-failure-rate"] == "100 %"
    assert reverse("later_django:task_detail", args=[ADD]) + "?range=hour" in page
    assert "within 9 % of the exact value" in page


def test_durations_are_read_from_the_histogram_in_human_units(
    viewer_client: Client, later_db: str
) -> None:
    at = now_ms()
    record(
        later_db,
        *(
            TaskMinuteSample("app.slow", "succeeded", "", at, bucket_of(2_000), 1, 2_000, 2_000, "")
            for _ in range(19)
        ),
        TaskMinuteSample("app.slow", "succeeded", "", at, bucket_of(90_000), 1, 9e4, 9e4, ""),
    )

    cells = row_cells(viewer_client.get(TASKS_URL).content.decode(), "later-task", "app.slow")

    # 2 s falls in the bucket [1.72 s, 2.05 s), read as its middle, 1.88 s (6 % off);
    # the 19th of 20 is still 2 s; the max is exact.
    assert cells["later-p50"] == "1.9 s"
    assert cells["later-p95"] == "1.9 s"
    assert cells["later-max"] == "1.5 min"


def test_a_range_counts_only_its_minutes_and_an_unknown_range_is_the_hour(
    viewer_client: Client, later_db: str
) -> None:
    two_hours_ago = now_ms() - 2 * HOUR_MS
    record(later_db, TaskMinuteSample("app.old", "succeeded", "", two_hours_ago, 5, 4, 8, 2, ""))

    assert "app.old" not in viewer_client.get(TASKS_URL).content.decode()
    assert "app.old" not in viewer_client.get(TASKS_URL + "?range=week").content.decode()
    # No page offers a week (decision 103): asking for one gives the hour.
    failures_week = viewer_client.get(FAILURES_URL + "?range=week").content.decode()
    assert 'href="?range=week"' not in failures_week and 'href="?range=day"' in failures_week
    day = viewer_client.get(TASKS_URL + "?range=day").content.decode()
    assert row_cells(day, "later-task", "app.old")["later-attempts"] == "4"


def test_the_failures_page_groups_by_task_and_error_with_the_newest_jobs_traceback(
    viewer_client: Client, later_db: str
) -> None:
    failed = run_jobs()

    response = viewer_client.get(FAILURES_URL)

    assert response.status_code == 200
    page = response.content.decode()
    cells = row_cells(page, "later-failure-group", f"<code>{BOOM}</code>")
    assert cells["later-failure-count"] == "2"
    assert cells["later-sample"] == failed[-1], "the newest failed job is the sample"
    assert cells["later-first-seen"] and cells["later-last-seen"]
    assert reverse("later_django:job_detail", args=[failed[-1]]) in page
    assert "Traceback (most recent call last)" in page
    assert SCRIPT not in page and html_module.escape(SCRIPT) in page
    selection = urlencode({"task": FAILING, "error": BOOM})
    failed_list = reverse("later_django:job_list", args=["failed"])
    assert html_module.escape(f"{failed_list}?{selection}") + '"' in page
    assert html_module.escape(f"{failed_list}?{selection}&bulk=retry") in page
    assert "Retry all…" in page


def test_failure_groups_count_first_and_last_seen_over_the_day(
    viewer_client: Client, later_db: str
) -> None:
    now = now_ms()
    old, recent = now - 20 * HOUR_MS, now - 3 * MINUTE_MS
    record(
        later_db,
        TaskMinuteSample("app.t", "retried", "app.E", old, 3, 5, 10, 2, "01A"),
        TaskMinuteSample("app.t", "failed", "app.E", recent, 3, 2, 4, 2, "01B"),
        TaskMinuteSample("app.t", "timed_out", "app.Timeout", recent, 9, 1, 50, 50, "01T"),
        TaskMinuteSample("app.t", "succeeded", "", recent, 3, 100, 200, 2, ""),
    )

    day = viewer_client.get(FAILURES_URL + "?range=day").content.decode()
    hour = viewer_client.get(FAILURES_URL).content.decode()

    grouped = row_cells(day, "later-failure-group", "<code>app.E</code>")
    assert grouped["later-failure-count"] == "7"
    assert grouped["later-first-seen"] == utc_minute(old)
    assert grouped["later-last-seen"] == utc_minute(recent + MINUTE_MS), "the minute's end"
    assert grouped["later-sample"] == "01B"
    assert "The newest job's record is gone" in day
    assert (
        row_cells(hour, "later-failure-group", "<code>app.E</code>")["later-failure-count"] == "2"
    )
    assert row_cells(hour, "later-failure-group", "app.Timeout")["later-failure-count"] == "1"


def test_the_task_page_shows_figures_chart_and_its_failure_groups(
    viewer_client: Client, later_db: str
) -> None:
    failed = run_jobs()

    response = viewer_client.get(reverse("later_django:task_detail", args=[FAILING]))

    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(r'<td class="num later-outcome-failed">2</td>', page)
    assert '<svg class="later-chart"' in page and "attempts / min" in page
    assert (
        row_cells(page, "later-failure-group", f"<code>{BOOM}</code>")["later-sample"]
        == (failed[-1])
    )
    other = viewer_client.get(reverse("later_django:task_detail", args=[ADD])).content.decode()
    assert "No failing attempt in the last hour." in other
    unknown = viewer_client.get(reverse("later_django:task_detail", args=["no.such.task"]))
    assert unknown.status_code == 200
    assert "No attempt of this task in the last hour." in unknown.content.decode()


def test_task_paths_and_error_classes_are_escaped_everywhere(
    viewer_client: Client, later_db: str
) -> None:
    path, error = "app.<b>bold</b>", "app.<i>Err</i>"
    record(later_db, TaskMinuteSample(path, "failed", error, now_ms(), 3, 1, 1, 1, "01X"))

    for url in (TASKS_URL, FAILURES_URL, reverse("later_django:task_detail", args=[path])):
        page = viewer_client.get(url).content.decode()
        assert "<b>bold</b>" not in page and "<i>Err</i>" not in page, url
        assert "&lt;b&gt;bold&lt;/b&gt;" in page or "%3Cb%3E" in page, url


def test_the_pages_are_for_staff_only_and_in_the_nav(viewer_client: Client, later_db: str) -> None:
    urls = (TASKS_URL, FAILURES_URL, reverse("later_django:task_detail", args=[ADD]))
    for url in urls:
        assert Client().get(url).status_code == 302, url
    outsider = Client()
    outsider.force_login(User.objects.create_user("outsider", password="x", is_staff=False))
    for url in urls:
        assert outsider.get(url).status_code == 302, url
    dashboard = viewer_client.get(reverse("later_django:dashboard")).content.decode()
    assert f'href="{TASKS_URL}"' in dashboard and f'href="{FAILURES_URL}"' in dashboard


def test_a_failure_group_whose_newest_job_gave_up_by_rule_says_so(
    viewer_client: Client, later_db: str, tmp_path: Path
) -> None:
    gave_up = give_up_tasks.give_up_on_missing.enqueue(str(tmp_path / "gave-up"), "missing")
    retried = give_up_tasks.give_up_on_missing.enqueue(str(tmp_path / "retried"), "boom")
    run_until_finished([gave_up.id, retried.id])
    metrics.flush()

    page = html_module.unescape(viewer_client.get(FAILURES_URL).content.decode())

    reasons = re.findall(r'<p class="later-failure-reason">([^<]*)</p>', page)
    assert reasons == [
        "Gave up at once on attempt 1 (3 retries left): "
        "django.core.exceptions.ObjectDoesNotExist is in the retry policy's give_up_on"
    ]
    assert (
        row_cells(page, "later-failure-group", "ObjectDoesNotExist")["later-failure-count"] == "1"
    )
    assert row_cells(page, "later-failure-group", BOOM)["later-failure-count"] == "4"
