"""Every panel and page of the dashboard renders with jobs in several stages."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from later_django.core.keys import job_key
from later_django.overview.figures import STAGES
from later_django.storage.stores import stores_for
from tests.admin.support import SCRIPT, seed_jobs

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

PANEL_IDS = (
    "later-panel-stages",
    "later-panel-throughput",
    "later-panel-db-size",
    "later-panel-history",
    "later-panel-workers",
    "later-panel-partitions",
    "later-panel-recurring",
)


def stage_count(html: str, stage: str) -> str:
    """The count shown in the stages panel for ``stage``."""
    found = re.search(
        rf'<tr class="later-stage-{stage}">.*?<td class="num">([^<]*)</td>', html, re.S
    )
    assert found, f"no row for stage {stage}"
    return found.group(1).strip()


def test_the_plain_dashboard_shows_every_panel_with_the_stage_counts(
    manager_client: Client, later_db: str
) -> None:
    seed_jobs()
    response = manager_client.get(reverse("later_django:dashboard"))
    assert response.status_code == 200
    html = response.content.decode()
    for panel in PANEL_IDS:
        assert f'id="{panel}"' in html, panel
    expected = {
        "success": "3",
        "failed": "1",
        "enqueued": "3",
        "delayed": "1",
        "waiting": "1",
        "running": "0",
        "requeued": "0",
    }
    assert {stage: stage_count(html, stage) for stage in expected} == expected
    for stage in STAGES:
        assert reverse("later_django:job_list", args=[stage]) in html
    # No topic and no recurring job configured in the tests.
    assert html.count("None configured.") == 2


def test_the_admin_index_is_the_admin_tools_dashboard_with_the_later_panels(
    manager_client: Client, later_db: str
) -> None:
    seed_jobs()
    response = manager_client.get(reverse("admin:index"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "dashboard-container" in html
    for panel in PANEL_IDS:
        assert f'id="{panel}"' in html, panel
    assert stage_count(html, "success") == "3"


def test_the_admin_index_links_every_operator_page_once_above_the_stages(
    manager_client: Client, later_db: str
) -> None:
    html = manager_client.get(reverse("admin:index")).content.decode()
    rows = re.findall(r'<nav class="later-index-links"[^>]*>(.*?)</nav>', html, re.S)
    assert len(rows) == 1, "one links row, not one per panel"
    # The row opens the Stages module, right above its panel.
    module_start = r'</nav>\s*<div class="later-module-content">\s*'
    assert re.search(module_start + r'<section [^>]*"later-panel-stages"', html)
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', rows[0])
    assert links == [
        (reverse("later_django:dashboard"), "Dashboard"),
        (reverse("later_django:failure_list"), "Failures"),
        (reverse("later_django:queue_list"), "Queues"),
        (reverse("later_django:worker_list"), "Workers"),
        (reverse("later_django:task_list"), "Tasks"),
        (reverse("later_django:recurring_list"), "Recurring"),
        (reverse("later_django:workflow_list"), "Workflows"),
    ]


def test_the_throughput_panel_counts_the_moves_of_the_last_minute(
    manager_client: Client, later_db: str
) -> None:
    seed_jobs()
    html = manager_client.get(reverse("later_django:dashboard")).content.decode()
    panel = html.split('id="later-panel-throughput"', 1)[1].split("</section>", 1)[0]
    rows = dict(re.findall(r"<tr><td>(\w+)</td><td class=\"num\">(\d+)</td></tr>", panel))
    # 4 jobs ran: each moved into running; 3 into success, 1 into failed.
    assert rows["running"] == "4"
    assert rows["success"] == "3"
    assert rows["failed"] == "1"
    waits = re.search(r"<tr><td>regular</td><td class=\"num\">(\d+)</td>", panel)
    assert waits and waits.group(1) == "4"


@pytest.mark.parametrize("range_name", ["hour", "day", "week"])
def test_the_history_chart_is_inline_svg_for_each_range(
    manager_client: Client, later_db: str, range_name: str
) -> None:
    storage = stores_for(later_db)
    from later_django.core.clock import now_ms

    now = now_ms()
    for minutes_ago, queued in ((50, 5), (20, 40), (1, 12)):
        storage.metrics.record_queue_sample("default", now - minutes_ago * 60_000, queued, 2)
    response = manager_client.get(reverse("later_django:dashboard"), {"range": range_name})
    html = response.content.decode()
    panel = html.split('id="later-panel-history"', 1)[1].split("</section>", 1)[0]
    # Readings apart (gaps between them) are dots, consecutive ones a line.
    assert "<svg" in panel and ("<polyline" in panel or "<circle" in panel)
    assert panel.count("<polyline") + panel.count("<circle") >= 2
    assert "<script" not in panel and "http" not in panel.replace("http://www.w3.org", "")
    assert "3 readings" in panel
    assert "peak 40" in panel
    assert f'class="current">{range_name}</a>' in panel


def test_every_job_page_renders(manager_client: Client, later_db: str) -> None:
    seeded = seed_jobs()
    for stage in STAGES:
        response = manager_client.get(reverse("later_django:job_list", args=[stage]))
        assert response.status_code == 200, stage
    listed = manager_client.get(reverse("later_django:job_list", args=["enqueued"]))
    for job_id in [*seeded.queued, seeded.script_job]:
        assert job_id in listed.content.decode()
    for job_id in [*seeded.succeeded, seeded.failed, seeded.delayed, seeded.waiting_child]:
        response = manager_client.get(reverse("later_django:job_detail", args=[job_id]))
        assert response.status_code == 200, job_id
    missing = manager_client.get(reverse("later_django:job_detail", args=["01NOTAJOB"]))
    assert missing.status_code == 404
    unknown = manager_client.get(reverse("later_django:job_list", args=["sleeping"]))
    assert unknown.status_code == 404


def test_the_job_page_shows_task_timeline_errors_and_return_value(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    failed = manager_client.get(reverse("later_django:job_detail", args=[seeded.failed]))
    html = failed.content.decode()
    assert "tests.engine.tasks.fail_once_without_retry" in html
    assert "tests.engine.tasks.Boom" in html
    assert "Traceback (most recent call last)" in html
    assert "it broke" in html
    timeline = html.split('class="later-timeline"', 1)[1].split("</ol>", 1)[0]
    assert re.findall(r"<strong>(\w+)</strong>", timeline) == ["enqueued", "running", "failed"]
    succeeded = manager_client.get(reverse("later_django:job_detail", args=[seeded.succeeded[2]]))
    assert '<pre class="later-code later-return">3</pre>' in succeeded.content.decode()


def test_the_parent_page_lists_its_waiting_continuation(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    parent = manager_client.get(reverse("later_django:job_detail", args=[seeded.delayed]))
    continuations = parent.content.decode().split("<h3>Continuations</h3>", 1)[1]
    assert seeded.waiting_child in continuations.split("</ul>", 1)[0]
    child = manager_client.get(reverse("later_django:job_detail", args=[seeded.waiting_child]))
    assert reverse("later_django:job_detail", args=[seeded.delayed]) in child.content.decode()


def test_arguments_are_rendered_escaped(manager_client: Client, later_db: str) -> None:
    seeded = seed_jobs()
    assert stores_for(later_db).kv.exist(job_key("default", seeded.script_job))
    html = manager_client.get(
        reverse("later_django:job_detail", args=[seeded.script_job])
    ).content.decode()
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html


def test_non_staff_users_are_sent_to_the_login_page(later_db: str) -> None:
    from django.contrib.auth.models import User

    client = Client()
    client.force_login(User.objects.create_user("visitor", password="x", is_staff=False))
    for url in (
        reverse("later_django:dashboard"),
        reverse("later_django:job_list", args=["failed"]),
        reverse("later_django:job_detail", args=["01ANY"]),
    ):
        response = client.get(url)
        assert response.status_code == 302, url
        assert reverse("admin:login") in response["Location"]


@pytest.mark.parametrize(
    "key,url_name",
    [
        ("dashboard", "later_django:dashboard"),
        ("failures", "later_django:failure_list"),
        ("queues", "later_django:queue_list"),
        ("workers", "later_django:worker_list"),
        ("tasks", "later_django:task_list"),
        ("recurring", "later_django:recurring_list"),
        ("workflows", "later_django:workflow_list"),
    ],
)
def test_every_operator_page_links_the_same_pages_as_the_admin_index_and_marks_itself(
    manager_client: Client, later_db: str, key: str, url_name: str
) -> None:
    """One list of operator pages: each page's nav has the admin index's links, in
    the same order, with exactly its own link marked current."""
    index = manager_client.get(reverse("admin:index")).content.decode()
    [row] = re.findall(r'<nav class="later-index-links"[^>]*>(.*?)</nav>', index, re.S)
    index_links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', row)
    html = manager_client.get(reverse(url_name)).content.decode()
    nav = html.split('class="later-page-nav"', 1)[1].split("</nav>", 1)[0]
    links = re.findall(r'<a href="([^"]+)"( class="current")?>([^<]+)</a>', nav)
    assert [(href, label) for href, _, label in links] == index_links
    assert [href for href, current, _ in links if current] == [reverse(url_name)]
