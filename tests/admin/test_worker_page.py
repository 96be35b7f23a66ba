"""The workers page: each live worker once, with its running jobs from the execution
leases (task path from the job's record), bounded; and the job page's worker ids."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from later_django.admin.workers import worker_page
from later_django.core.clock import now_ms
from later_django.core.keys import job_key
from later_django.core.records import encode_record
from later_django.storage.stores import stores_for
from later_django.storage.types import WorkerRow
from tests.admin.test_actions import record_of
from tests.engine import tasks

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

WORKERS_URL = "/admin/later_django/workers/"
WORKER = "vm:11553:YRACdZ"
MINUTE = 60_000


def beat(alias: str, worker_id: str, *, heartbeat_ago_ms: int = 20_000, **fields: object) -> None:
    now = now_ms()
    values: dict = {
        "worker_id": worker_id,
        "host": "vm",
        "pid": 11553,
        "concurrency": 4,
        "queues": ["default", "emails"],
        "busy": 1,
        "started_at_ms": now - 120 * MINUTE,
        "heartbeat_at_ms": now - heartbeat_ago_ms,
    }
    values.update(fields)
    stores_for(alias).executions.worker_heartbeat("default", WorkerRow(**values))


def hold(alias: str, worker_id: str, job_id: str, *, started_ago_ms: int, attempt: int = 1) -> None:
    """An execution lease of ``job_id`` held by ``worker_id`` (as a worker's start writes)."""
    now = now_ms()
    stores_for(alias).executions.lease_acquire_many(
        "default", worker_id, now - started_ago_ms, [(job_id, now + 30_000, attempt)]
    )


def worker_rows(html: str) -> list[str]:
    """The HTML of each worker's line (its running jobs' table included)."""
    table = html.split('id="later-workers"', 1)[1].split("</table>\n</div>", 1)[0]
    return table.split('<tr class="later-worker"')[1:]


def test_a_live_worker_shows_its_figures_and_the_jobs_it_runs(
    manager_client: Client, later_db: str
) -> None:
    running = tasks.add.enqueue(1, 2).id
    other = tasks.add_on_emails.enqueue(3, 4).id
    beat(later_db, WORKER, busy=2)
    hold(later_db, WORKER, running, started_ago_ms=90_000, attempt=2)
    hold(later_db, WORKER, other, started_ago_ms=3 * 3_600_000)
    # A dead worker (no heartbeat for two minutes) and its lease are not shown.
    beat(later_db, "vm:99:DEAD", heartbeat_ago_ms=2 * MINUTE, pid=99)
    dead_job = tasks.add.enqueue(5, 6).id
    hold(later_db, "vm:99:DEAD", dead_job, started_ago_ms=1_000)

    response = manager_client.get(WORKERS_URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count(f"<code>{WORKER}</code>") == 1
    assert "vm:99:DEAD" not in html and dead_job not in html
    rows = worker_rows(html)
    assert len(rows) == 1
    row = rows[0]
    assert '<td class="num">11553</td>' in row
    assert 'UTC">2 h ago</span>' in row  # started
    assert '<td class="later-heartbeat">20 s ago</td>' in row
    assert '<td class="later-worker-queues">default, emails</td>' in row
    assert '<td class="num later-busy">2 / 4</td>' in row
    jobs = re.findall(r'<tr class="later-running-job">(.*?)</tr>', row, re.S)
    # The longest running first: the job started three hours ago.
    assert [re.search(r"/job/(\w+)/", job).group(1) for job in jobs] == [other, running]
    assert f'href="{reverse("later_django:job_detail", args=[running])}"' in jobs[1]
    assert "<code>tests.engine.tasks.add</code>" in jobs[1]
    assert "<code>tests.engine.tasks.add_on_emails</code>" in jobs[0]
    assert '<td class="num">2</td><td class="num later-running-for">1.5 min</td>' in jobs[1]
    assert '<td class="num later-running-for">3 h</td>' in jobs[0]
    assert "More than" not in html


def test_an_idle_worker_and_no_worker(manager_client: Client, later_db: str) -> None:
    assert "No live worker." in manager_client.get(WORKERS_URL).content.decode()
    beat(later_db, WORKER, busy=0)
    html = manager_client.get(WORKERS_URL).content.decode()
    assert '<span class="later-hint">idle</span>' in html
    assert '<td class="num later-busy">0 / 4</td>' in html


def test_at_most_the_limit_of_running_jobs_is_listed_and_the_page_says_so(
    manager_client: Client, later_db: str
) -> None:
    beat(later_db, WORKER, busy=201, concurrency=256)
    now = now_ms()
    stores_for(later_db).executions.lease_acquire_many(
        "default", WORKER, now - MINUTE, [(f"job-{n:03}", now + 30_000, 1) for n in range(201)]
    )
    html = manager_client.get(WORKERS_URL).content.decode()
    assert "More than 200 jobs are running: only the 200 that started first are listed." in html
    assert html.count('<tr class="later-running-job">') == 200
    assert "job-199" in html and "job-200" not in html
    # These leases name jobs without a record.
    assert '<span class="later-hint">no record</span>' in html
    page = worker_page(limit=5)
    assert (page.jobs_shown, page.more_running) == (5, True)
    assert [job.job_id for job in page.workers[0].jobs] == [f"job-{n:03}" for n in range(5)]


def test_a_lapsed_lease_is_marked(manager_client: Client, later_db: str) -> None:
    job_id = tasks.add.enqueue(1, 2).id
    beat(later_db, WORKER)
    now = now_ms()
    stores_for(later_db).executions.lease_acquire_many(
        "default", WORKER, now - 2 * MINUTE, [(job_id, now - MINUTE, 1)]
    )
    html = manager_client.get(WORKERS_URL).content.decode()
    assert '2 min <span class="later-lapsed">(lease lapsed)</span>' in html


def test_worker_fields_are_escaped(manager_client: Client, later_db: str) -> None:
    beat(later_db, "<b>w</b>", host="<i>host</i>", queues=["<script>q</script>"])
    html = manager_client.get(WORKERS_URL).content.decode()
    for raw in ("<b>w</b>", "<i>host</i>", "<script>q</script>"):
        assert raw not in html
    assert "&lt;b&gt;w&lt;/b&gt;" in html
    assert "&lt;i&gt;host&lt;/i&gt;" in html
    assert "&lt;script&gt;q&lt;/script&gt;" in html


def test_the_page_needs_only_staff_not_the_manage_permission(
    viewer_client: Client, later_db: str
) -> None:
    beat(later_db, WORKER)
    response = viewer_client.get(WORKERS_URL)
    assert response.status_code == 200
    assert f"<code>{WORKER}</code>" in response.content.decode()


def test_the_job_page_names_each_worker_once_with_its_attempts(
    manager_client: Client, later_db: str
) -> None:
    job_id = tasks.add.enqueue(1, 2).id
    record = record_of(later_db, job_id)
    record.worker_ids = [WORKER, WORKER, "vm:2:OTHER"]
    stores_for(later_db).kv.set(job_key("default", job_id), encode_record(record))
    html = manager_client.get(reverse("later_django:job_detail", args=[job_id])).content.decode()
    cell = html.split('<td class="later-job-workers">', 1)[1].split("</td>", 1)[0]
    assert cell.count(WORKER) == 1
    assert cell == (f"<code>{WORKER}</code> (attempts 1, 2), <code>vm:2:OTHER</code> (attempt 3)")
