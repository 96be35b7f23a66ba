"""The job lists' columns, filters (task, queue, time range, error) and search, their
cursor pages, and the cap on rows a filter the index cannot serve looks at."""

from __future__ import annotations

import dataclasses
import html as html_lib
import re
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from later_django.admin import jobs
from later_django.api import enqueue_many
from later_django.core.clock import now_ms
from later_django.core.keys import job_key
from later_django.core.records import encode_record, new_job_id
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexRow
from tests.admin.support import SCRIPT
from tests.admin.test_actions import record_of
from tests.engine import tasks
from tests.engine.support import run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

JOB_LINK = re.compile(r'<a href="/admin/later_django/job/(\w+)/"><code>')
NEXT_LINK = re.compile(r'<a class="later-next" href="\?([^"]+)">')
CONTINUE_LINK = re.compile(r'<a class="later-continue" href="\?([^"]+)">')


def list_url(stage: str) -> str:
    return reverse("later_django:job_list", args=[stage])


def listed(html: str) -> list[str]:
    """The job ids of the page's table, in order."""
    if 'class="later-table later-jobs"' not in html:
        return []
    table = html.split('class="later-table later-jobs"', 1)[1].split("</table>", 1)[0]
    return JOB_LINK.findall(table)


def get_ids(client: Client, stage: str, **params: str) -> list[str]:
    response = client.get(list_url(stage), params)
    assert response.status_code == 200, response.content.decode()[:2000]
    return listed(response.content.decode())


def failed(*messages: str, task=tasks.fail_once_without_retry) -> list[str]:
    ids = enqueue_many(task, [((message,), {}) for message in messages], ids_only=True)
    run_burst()
    return ids


def delayed(task, n: int) -> list[str]:
    later = task.using(run_after=timezone.now() + timedelta(hours=1))
    return enqueue_many(later, [((i, 0), {}) for i in range(n)], ids_only=True)


def set_error_class(alias: str, job_id: str, class_path: str) -> None:
    """Gives the job's last error another class, in its record and in its index row
    (both written by the move that recorded the error)."""
    record = record_of(alias, job_id)
    record.errors[-1].exception_class_path = class_path
    stores = stores_for(alias)
    stores.kv.set(job_key("default", job_id), encode_record(record))
    row = stores.index.job_index_get("default", job_id)
    assert row is not None
    stores.index.job_index_upsert("default", [dataclasses.replace(row, error_class=class_path)])


def test_the_failed_list_shows_queue_attempts_duration_error_and_created(
    manager_client: Client, later_db: str
) -> None:
    [job_id] = failed("it broke\nsecond line")
    html = manager_client.get(list_url("failed")).content.decode()
    for header in ("Task", "Queue", "Stage", "Attempts", "Run at", "Duration", "Error", "Created"):
        assert f"<th>{header}</th>" in html
    row = html.split(f"/job/{job_id}/", 1)[1].split("</tr>", 1)[0]
    assert (
        '<td class="later-task" data-label="Task">tests.engine.tasks.fail_once_without_retry'
        '</td><td data-label="Queue">default</td>'
    ) in row
    assert '<td data-label="Stage">failed</td><td data-label="Attempts">1</td>' in row
    assert re.search(r'<td data-label="Duration">\d+(\.\d)? (ms|s)</td>', row), row
    assert ">tests.engine.tasks.Boom: it broke</span>" in row
    assert "second line" not in row


def test_the_delayed_list_says_when_each_job_will_run(
    manager_client: Client, later_db: str
) -> None:
    [job_id] = delayed(tasks.add, 1)
    run_at = record_of(later_db, job_id).run_after_ms
    expected = timezone.localtime(datetime.fromtimestamp(run_at / 1000, tz=UTC))
    row = manager_client.get(list_url("delayed")).content.decode().split(f"/job/{job_id}/", 1)[1]
    shown = f'<td data-label="Run at">{expected:%Y-%m-%d %H:%M:%S}</td>'
    assert shown in row.split("</tr>", 1)[0]


def test_the_page_reads_its_records_in_one_statement(manager_client: Client, later_db: str) -> None:
    delayed(tasks.add, 5)
    with CaptureQueriesContext(connections[later_db]) as captured:
        response = manager_client.get(list_url("delayed"))
    assert len(listed(response.content.decode())) == 5
    record_reads = [q["sql"] for q in captured.captured_queries if "later_storage " in q["sql"]]
    assert len(record_reads) == 1, record_reads


def test_the_task_filter_takes_a_path_or_a_prefix(manager_client: Client, later_db: str) -> None:
    adds = delayed(tasks.add, 2)
    emails = delayed(tasks.add_on_emails, 1)
    assert set(get_ids(manager_client, "delayed", task="tests.engine.tasks.add")) == set(adds)
    assert set(get_ids(manager_client, "delayed", task="tests.engine.tasks.add*")) == {
        *adds,
        *emails,
    }
    assert get_ids(manager_client, "delayed", task="tests.engine.tasks.ad") == []
    assert get_ids(manager_client, "delayed", task="other.*") == []


def test_the_queue_filter(manager_client: Client, later_db: str) -> None:
    adds = delayed(tasks.add, 2)
    emails = delayed(tasks.add_on_emails, 1)
    assert set(get_ids(manager_client, "delayed", queue="default")) == set(adds)
    assert get_ids(manager_client, "delayed", queue="emails") == emails
    assert get_ids(manager_client, "delayed", queue="nowhere") == []


def test_the_filters_apply_to_the_queued_jobs_of_the_delivery_queue(
    manager_client: Client, later_db: str
) -> None:
    adds = enqueue_many(tasks.add, [((1, 2), {})], ids_only=True)
    emails = enqueue_many(tasks.add_on_emails, [((1, 2), {})], ids_only=True)
    assert get_ids(manager_client, "enqueued", task="tests.engine.tasks.add") == adds
    assert get_ids(manager_client, "enqueued", queue="emails") == emails
    assert get_ids(manager_client, "enqueued", since="1h") == [*emails, *adds]
    assert get_ids(manager_client, "enqueued", until="1h") == []


def test_the_time_range_takes_relative_and_iso_times(manager_client: Client, later_db: str) -> None:
    older = delayed(tasks.add, 2)
    time.sleep(0.01)
    cut = datetime.now(UTC)
    time.sleep(0.01)
    newer = delayed(tasks.add, 1)
    two_hours_ago = now_ms() - 2 * 3_600_000
    old_row = JobIndexRow(new_job_id(), "tests.engine.tasks.add", "delayed", two_hours_ago, 1, 0)
    stores_for(later_db).index.job_index_upsert("default", [old_row])

    assert set(get_ids(manager_client, "delayed", since="1h")) == {*older, *newer}
    assert get_ids(manager_client, "delayed", until="1h") == [old_row.job_id]
    assert get_ids(manager_client, "delayed", since=cut.isoformat()) == newer
    assert set(get_ids(manager_client, "delayed", since="1d", until=cut.isoformat())) == {
        *older,
        old_row.job_id,
    }
    naive_local = timezone.localtime(cut).replace(tzinfo=None).isoformat()
    assert get_ids(manager_client, "delayed", since=naive_local) == newer


def test_the_error_filter_takes_the_last_errors_class(
    manager_client: Client, later_db: str
) -> None:
    boom, other = failed("one", "two")
    set_error_class(later_db, other, "app.errors.Timeout")
    assert get_ids(manager_client, "failed", error="tests.engine.tasks.Boom") == [boom]
    assert get_ids(manager_client, "failed", error="app.errors.Timeout") == [other]
    task = "tests.engine.tasks.fail_once_without_retry"
    assert get_ids(manager_client, "failed", error="app.errors.Timeout", task=task) == [other]
    assert get_ids(manager_client, "failed", error="app.errors.Timeout", task="x.y") == []


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"since": "yesterday"}, ["since 'yesterday' is not a time", "1h, 1d or 7d", "ISO 8601"]),
        ({"until": "2026-13-40"}, ["until '2026-13-40' is not a time"]),
        ({"task": "app.*.send"}, ["task 'app.*.send' is not a task path or prefix"]),
        ({"task": "*"}, ["task '*' is not a task path or prefix"]),
        (
            {"since": "2026-12-03T10:00", "until": "2026-12-03T09:00"},
            ["is after until", "must start before it ends"],
        ),
    ],
)
def test_a_bad_filter_value_is_named_with_its_rule(
    manager_client: Client, later_db: str, params: dict[str, str], named: list[str]
) -> None:
    failed("x")
    response = manager_client.get(list_url("failed"), params)
    assert response.status_code == 400
    page = html_lib.unescape(response.content.decode())
    assert "No jobs are listed" in page
    for text in named:
        assert text in page
    assert listed(response.content.decode()) == []


def test_filter_values_and_error_messages_are_escaped(
    manager_client: Client, later_db: str
) -> None:
    failed(SCRIPT)
    for params in ({}, {"task": SCRIPT}, {"queue": SCRIPT}, {"error": SCRIPT}):
        html = manager_client.get(list_url("failed"), params).content.decode()
        assert SCRIPT not in html, params
        assert "&lt;script&gt;" in html, params


def test_search_by_exact_job_id_opens_the_job(manager_client: Client, later_db: str) -> None:
    [job_id] = delayed(tasks.add, 1)
    response = manager_client.get(list_url("failed"), {"q": f"  {job_id} "})
    assert response.status_code == 302
    assert response["Location"] == reverse("later_django:job_detail", args=[job_id])


def test_search_for_an_unknown_job_id_says_so(manager_client: Client, later_db: str) -> None:
    missing = new_job_id()
    response = manager_client.get(list_url("failed"), {"q": missing}, follow=True)
    assert f"No job with id {missing}" in response.content.decode()


def test_search_text_is_a_task_path_prefix_and_keeps_the_filters(
    manager_client: Client, later_db: str
) -> None:
    adds = delayed(tasks.add, 1)
    delayed(tasks.record, 0)
    delayed(tasks.add_on_emails, 1)
    response = manager_client.get(
        list_url("delayed"), {"q": "tests.engine.tasks.add", "queue": "default"}
    )
    assert response.status_code == 302
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query == {"task": ["tests.engine.tasks.add*"], "queue": ["default"]}
    assert listed(manager_client.get(response["Location"]).content.decode()) == adds


def test_cursor_pages_keep_the_filters(
    manager_client: Client, later_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs, "PAGE_SIZE", 2)
    adds = delayed(tasks.add, 5)
    delayed(tasks.add_on_emails, 3)
    seen: list[str] = []
    query = "queue=default"
    for _ in range(5):
        html = manager_client.get(f"{list_url('delayed')}?{query}").content.decode()
        seen += listed(html)
        found = NEXT_LINK.search(html)
        if found is None:
            break
        query = html_lib.unescape(found.group(1))
        assert "queue=default" in query
    assert seen == list(reversed(adds))


def test_the_scan_cap_is_said_and_the_search_can_go_on(
    manager_client: Client, later_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A task prefix is the one filter of an index-listed stage the filter indexes
    # cannot serve: its walk is capped.
    monkeypatch.setattr(jobs, "SCAN_CAP", 3)
    [target] = delayed(tasks.add_on_emails, 1)
    delayed(tasks.add, 4)
    prefix = {"task": "tests.engine.tasks.add_on*"}
    html = manager_client.get(list_url("delayed"), prefix).content.decode()
    assert listed(html) == []
    assert "Searched the newest 3 delayed jobs" in html
    assert "narrow the time range to search older ones" in html
    assert NEXT_LINK.search(html) is None
    query = html_lib.unescape(CONTINUE_LINK.search(html).group(1))
    assert "task=tests.engine.tasks.add_on" in query
    following = manager_client.get(f"{list_url('delayed')}?{query}").content.decode()
    assert listed(following) == [target]
    assert "Searched" not in following
    # An unfiltered list is served by the index: no cap, no label.
    assert len(get_ids(manager_client, "delayed")) == 5


@pytest.mark.parametrize(
    "params",
    [
        {"queue": "emails"},
        {"task": "tests.engine.tasks.add_on_emails"},
        {"queue": "emails", "task": "tests.engine.tasks.add_on_emails"},
    ],
)
def test_task_and_queue_filters_have_no_cap_and_no_continue_link(
    manager_client: Client, later_db: str, monkeypatch: pytest.MonkeyPatch, params: dict[str, str]
) -> None:
    monkeypatch.setattr(jobs, "SCAN_CAP", 3)
    [target] = delayed(tasks.add_on_emails, 1)
    delayed(tasks.add, 4)
    html = manager_client.get(list_url("delayed"), params).content.decode()
    assert listed(html) == [target]
    assert "Searched" not in html
    assert CONTINUE_LINK.search(html) is None
    assert get_ids(manager_client, "delayed", queue="nosuch") == []


def test_the_filters_travel_in_the_bulk_form(manager_client: Client, later_db: str) -> None:
    failed("x")
    params = {"task": "tests.engine.tasks.fail*", "since": "1d"}
    html = manager_client.get(list_url("failed"), params).content.decode()
    form = html.split('class="later-bulk"', 1)[1].split("</form>", 1)[0]
    assert '<input type="hidden" name="task" value="tests.engine.tasks.fail*">' in form
    assert '<input type="hidden" name="since" value="1d">' in form
    assert "all failed jobs matching this filter" in form
