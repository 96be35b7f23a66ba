"""The queues page: one row per queue with its figures, throughput, pause and limits;
Pause and Resume as CSRF POSTs needing the manage permission."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client, override_settings
from django.urls import reverse

from later_django import api
from later_django.admin.units import NONE_TEXT
from later_django.core.clock import MINUTE_MS, now_ms
from later_django.engine import metrics
from later_django.storage.stores import stores_for
from later_django.storage.types import JobIndexMetricsBatch, TaskMinuteSample, WorkerRow
from tests.engine import tasks
from tests.engine.support import run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

QUEUES_URL = "/admin/later_django/queues/"
LIMITS = {"emails": {"concurrency": 5, "rate": "100/60s"}, "reports": {"rate": "10/1h"}}
HOURS_3 = 3 * 3_600_000


@pytest.fixture
def limited_db(later_db: str) -> Iterator[str]:
    """``later_db`` with ``LATER["QUEUE_LIMITS"]`` set."""
    with override_settings(
        LATER={"NAMESPACE": "default", "DATABASE": later_db, "QUEUE_LIMITS": LIMITS}
    ):
        yield later_db


def cells(html: str, queue: str) -> dict[str, str]:
    """The cells of ``queue``'s row by class (``queue`` as the HTML spells it)."""
    rows = re.findall(r'<tr class="(later-queue[^"]*)">(.*?)</tr>', html, re.S)
    mine = [
        (row_class, row)
        for row_class, row in rows
        if f'<td class="later-queue-name"><code>{queue}</code>' in row
    ]
    assert len(mine) == 1, f"{len(mine)} rows of {queue} in {rows}"
    row_class, row = mine[0]
    found = dict(re.findall(r'<td class="(?:num )?(later-[\w-]+)">(.*?)</td>', row, re.S))
    found["row-class"] = row_class
    return found


def age_messages(alias: str, queue: str, by_ms: int) -> None:
    """Makes ``queue``'s messages ``by_ms`` older (as if published that long ago)."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "UPDATE later_delivery_queue SET available_at = available_at - %s "
            "WHERE queue_name = %s",
            [by_ms, queue],
        )


def beat(alias: str, worker_id: str, busy_queues: dict[str, int]) -> None:
    now = now_ms()
    stores_for(alias).executions.worker_heartbeat(
        "default",
        WorkerRow(
            worker_id=worker_id,
            host="vm",
            pid=11553,
            concurrency=4,
            queues=["default", "emails"],
            busy=sum(busy_queues.values()),
            started_at_ms=now - 60_000,
            heartbeat_at_ms=now,
            busy_queues=busy_queues,
        ),
    )


def test_the_url_is_named_queue_list() -> None:
    assert reverse("later_django:queue_list") == QUEUES_URL
    assert reverse("later_django:worker_list") == "/admin/later_django/workers/"


def test_each_queue_shows_ready_running_oldest_age_pause_and_limits(
    manager_client: Client, limited_db: str
) -> None:
    for n in range(3):
        tasks.add.enqueue(n, 1)
    tasks.add_on_emails.enqueue(1, 2)
    age_messages(limited_db, "default", HOURS_3)
    api.pause_queue("emails", by="ops@host")
    beat(limited_db, "vm:11553:YRACdZ", {"default": 2, "emails": 1})
    response = manager_client.get(QUEUES_URL)
    assert response.status_code == 200
    html = response.content.decode()
    default = cells(html, "default")
    assert default["later-ready"] == "3"
    assert default["later-running"] == "2"
    assert default["later-oldest"] == "3 h"
    assert default["later-state"] == "claiming"
    assert default["row-class"] == "later-queue"
    assert default["later-concurrency"] == NONE_TEXT and default["later-rate"] == NONE_TEXT
    emails = cells(html, "emails")
    assert emails["later-ready"] == "1"
    assert emails["later-running"] == "1"
    assert re.fullmatch(r"[\d.]+ (ms|s)", emails["later-oldest"]), emails["later-oldest"]
    assert emails["later-state"].startswith("paused ")
    assert emails["later-paused-by"] == "ops@host"
    assert emails["later-concurrency"] == "5"
    assert emails["later-rate"] == "100 / 1 min"
    # A queue named in TASKS or QUEUE_LIMITS is listed while it holds nothing.
    reports = cells(html, "reports")
    assert reports["later-ready"] == "0" and reports["later-oldest"] == NONE_TEXT
    assert reports["later-rate"] == "10 / 1 h"
    assert "1 live worker " in html
    # The manager sees Resume on the paused queue, Pause on the others.
    assert html.count(">Resume</button>") == 1
    assert html.count(">Pause</button>") == 2


def start_of_a_minute(room_ms: int = 10_000) -> None:
    """Waits for the next minute when fewer than ``room_ms`` are left of this one, so that
    jobs run now and the page read after them fall in the same minute."""
    left = MINUTE_MS - now_ms() % MINUTE_MS
    if left < room_ms:
        time.sleep(left / 1000 + 0.05)


def test_each_queue_shows_the_attempts_done_in_the_minute_and_the_hour(
    manager_client: Client, limited_db: str
) -> None:
    start_of_a_minute()
    ids = [tasks.add.enqueue(n, 1).id for n in range(3)]
    ids.append(tasks.add_on_emails.enqueue(1, 2).id)
    ids.append(tasks.fail_once_without_retry.using(queue_name="emails").enqueue("no").id)
    ids.append(tasks.cancel_itself.using(queue_name="emails").enqueue().id)  # not done
    run_until_finished(ids, queues=["default", "emails"])
    metrics.flush()
    an_hour_ago = now_ms() - 59 * MINUTE_MS
    stores_for(limited_db).metrics.record_batch(
        "default",
        JobIndexMetricsBatch(
            task_minutes=[
                TaskMinuteSample("t", "succeeded", "", an_hour_ago, 3, 1_500, 1, 1, "", "emails"),
                TaskMinuteSample(
                    "t", "succeeded", "", an_hour_ago - MINUTE_MS, 3, 900, 1, 1, "", "emails"
                ),
            ]
        ),
    )

    html = manager_client.get(QUEUES_URL).content.decode()

    assert "No per-queue throughput" not in html
    assert '<th class="num">Done / min</th><th class="num">Done / h</th>' in html
    default, emails = cells(html, "default"), cells(html, "emails")
    assert (default["later-done-minute"], default["later-done-hour"]) == ("3", "3")
    assert default["later-failing-hour"] == "0"
    assert (emails["later-done-minute"], emails["later-done-hour"]) == ("2", "1.5k")
    assert emails["later-failing-hour"] == "1"
    reports = cells(html, "reports")  # configured, never ran a job
    assert (reports["later-done-minute"], reports["later-done-hour"]) == ("0", "0")


def test_pause_then_resume_from_the_page(manager_client: Client, limited_db: str) -> None:
    tasks.add_on_emails.enqueue(1, 2)
    response = manager_client.post(reverse("later_django:queue_pause"), {"queue": "emails"})
    assert response.status_code == 302 and response["Location"] == QUEUES_URL
    assert [(q.name, q.by) for q in api.paused_queues()] == [("emails", "manager")]
    html = manager_client.get(QUEUES_URL).content.decode()
    assert "Queue &#x27;emails&#x27; is paused" in html
    emails = cells(html, "emails")
    assert re.match(r"paused [\d.]+ (ms|s) ago", emails["later-state"]), emails["later-state"]
    assert emails["row-class"] == "later-queue later-paused"
    assert emails["later-paused-by"] == "manager"
    again = manager_client.post(
        reverse("later_django:queue_pause"), {"queue": "emails"}, follow=True
    )
    assert "was already paused; nothing changed" in again.content.decode()
    resumed = manager_client.post(
        reverse("later_django:queue_resume"), {"queue": "emails"}, follow=True
    )
    assert "Queue &#x27;emails&#x27; is resumed." in resumed.content.decode()
    assert api.paused_queues() == []
    assert cells(resumed.content.decode(), "emails")["later-state"] == "claiming"


def test_an_invalid_queue_name_is_refused_with_a_message(
    manager_client: Client, later_db: str
) -> None:
    response = manager_client.post(
        reverse("later_django:queue_pause"), {"queue": "__later_own"}, follow=True
    )
    assert "are later_django&#x27;s own" in response.content.decode()
    empty = manager_client.post(reverse("later_django:queue_pause"), {})
    assert empty.status_code == 400
    assert "queue &#x27;&#x27; is empty" in empty.content.decode()
    assert api.paused_queues() == []


def test_pause_and_resume_need_the_manage_permission(viewer_client: Client, later_db: str) -> None:
    html = viewer_client.get(QUEUES_URL).content.decode()
    assert cells(html, "default")["later-ready"] == "0"
    assert ">Pause</button>" not in html
    response = viewer_client.post(reverse("later_django:queue_pause"), {"queue": "default"})
    assert response.status_code == 403
    assert api.paused_queues() == []
    api.pause_queue("default", by="ops")
    response = viewer_client.post(reverse("later_django:queue_resume"), {"queue": "default"})
    assert response.status_code == 403
    assert [q.name for q in api.paused_queues()] == ["default"]


def test_pause_and_resume_are_post_only_and_need_the_csrf_token(
    manager_client: Client, csrf_manager_client: Client, later_db: str
) -> None:
    assert manager_client.get(reverse("later_django:queue_pause")).status_code == 405
    assert manager_client.get(reverse("later_django:queue_resume")).status_code == 405
    refused = csrf_manager_client.post(reverse("later_django:queue_pause"), {"queue": "default"})
    assert refused.status_code == 403 and b"CSRF" in refused.content
    assert api.paused_queues() == []
    token = str(csrf_manager_client.get(QUEUES_URL).context["csrf_token"])
    accepted = csrf_manager_client.post(
        reverse("later_django:queue_pause"), {"queue": "default", "csrfmiddlewaretoken": token}
    )
    assert accepted.status_code == 302
    assert [(q.name, q.by) for q in api.paused_queues()] == [("default", "csrf-manager")]
    refused = csrf_manager_client.post(reverse("later_django:queue_resume"), {"queue": "default"})
    assert refused.status_code == 403
    assert [q.name for q in api.paused_queues()] == ["default"]


def test_queue_names_and_pausers_are_escaped(manager_client: Client, later_db: str) -> None:
    name = "<b>bold</b>"
    refused = manager_client.post(reverse("later_django:queue_pause"), {"queue": name})
    assert refused.status_code == 400  # not a known queue; its name is escaped there too
    assert name not in refused.content.decode()
    assert "&lt;b&gt;bold&lt;/b&gt;" in refused.content.decode()
    api.pause_queue(name, by="manager")
    html = manager_client.get(QUEUES_URL).content.decode()
    assert name not in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    assert cells(html, "&lt;b&gt;bold&lt;/b&gt;")["later-paused-by"] == "manager"
    api.pause_queue("other", by="<i>mallory</i>")
    html = manager_client.get(QUEUES_URL).content.decode()
    assert "<i>mallory</i>" not in html
    assert cells(html, "other")["later-paused-by"] == "&lt;i&gt;mallory&lt;/i&gt;"
    # Its attempts of the hour are escaped with it.
    stores_for(later_db).metrics.record_batch(
        "default",
        JobIndexMetricsBatch(
            task_minutes=[TaskMinuteSample("t", "succeeded", "", now_ms(), 3, 2, 1, 1, "", name)]
        ),
    )
    html = manager_client.get(QUEUES_URL).content.decode()
    assert name not in html
    assert cells(html, "&lt;b&gt;bold&lt;/b&gt;")["later-done-hour"] == "2"
    # A queue listed for the jobs a live worker runs from it has its name escaped too.
    busy = "<i>busy</i>"
    beat(later_db, "vm:11553:YRACdZ", {busy: 1})
    stores_for(later_db).metrics.record_batch(
        "default",
        JobIndexMetricsBatch(
            task_minutes=[TaskMinuteSample("t", "failed", "E", now_ms(), 3, 4, 1, 1, "01A", busy)]
        ),
    )
    html = manager_client.get(QUEUES_URL).content.decode()
    assert busy not in html
    assert cells(html, "&lt;i&gt;busy&lt;/i&gt;")["later-failing-hour"] == "4"
    assert cells(html, "&lt;i&gt;busy&lt;/i&gt;")["later-running"] == "1"
    # The hidden field carries the name back exactly: Resume resumes that queue.
    assert 'value="&lt;b&gt;bold&lt;/b&gt;"' in html
    manager_client.post(reverse("later_django:queue_resume"), {"queue": name})
    assert [q.name for q in api.paused_queues()] == ["other"]


def test_the_pages_need_a_staff_user(later_db: str) -> None:
    visitor = Client()
    visitor.force_login(User.objects.create_user("visitor", password="x", is_staff=False))
    for client in (Client(), visitor):
        for url in (QUEUES_URL, reverse("later_django:worker_list")):
            response = client.get(url)
            assert response.status_code == 302, url
            assert reverse("admin:login") in response["Location"]
        response = client.post(reverse("later_django:queue_pause"), {"queue": "default"})
        assert response.status_code == 302
    assert api.paused_queues() == []


def test_the_nav_links_both_pages(manager_client: Client, later_db: str) -> None:
    html = manager_client.get(reverse("later_django:dashboard")).content.decode()
    nav = html.split('class="later-page-nav"', 1)[1].split("</nav>", 1)[0]
    assert f'href="{QUEUES_URL}"' in nav
    assert 'href="/admin/later_django/workers/"' in nav
    queues = manager_client.get(QUEUES_URL).content.decode()
    assert f'<a href="{QUEUES_URL}" class="current">Queues</a>' in queues
