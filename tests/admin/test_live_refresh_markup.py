"""Live refresh as the server sees it: the pages mark their refreshable regions with
stable ids and load ``live_refresh.js`` (deferred, with the interval), and the script's
fetch (the same view, ``X-Later-Refresh: 1``) answers the same regions with fresh
figures without consuming the messages meant for the next full page."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from tests.admin.support import seed_jobs
from tests.admin.test_pages import stage_count
from tests.engine import tasks

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

REFRESH = {"HTTP_X_LATER_REFRESH": "1"}
SCRIPT = "later_django/live_refresh.js"
DASHBOARD_REGIONS = {
    "later-panel-stages",
    "later-panel-throughput",
    "later-panel-db-size",
    "later-panel-history",
    "later-panel-throughput-chart",
    "later-panel-workers",
    "later-panel-partitions",
    "later-panel-recurring",
}
#: URL name (and arguments) → the regions its page marks.
PAGES = {
    ("later_django:dashboard", ()): DASHBOARD_REGIONS,
    ("later_django:queue_list", ()): {"later-queue-page"},
    ("later_django:worker_list", ()): {"later-worker-page"},
    ("later_django:job_list", ("failed",)): {"later-job-list"},
    ("later_django:job_list", ("cancelled",)): {"later-job-list"},  # no job: still there
    ("later_django:recurring_list", ()): {"later-recurring-page"},
    ("later_django:task_list", ()): {"later-task-page"},
    ("later_django:failure_list", ()): {"later-failure-page"},
    ("later_django:workflow_list", ()): {"later-workflow-page"},
}
#: Elements without an end tag: never open, so never on the stack of open elements.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}


class Markup(HTMLParser):
    """The ids of a page, the ids of its refreshable regions, and its script tags."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.ids: Counter[str] = Counter()
        self.regions: list[str | None] = []
        self.scripts: list[dict[str, str | None]] = []
        #: region id → the (tag, attributes) of the elements inside it.
        self.inside: dict[str, list[tuple[str, dict[str, str | None]]]] = {}
        self._open: list[tuple[str, str | None]] = []  # (tag, region id it opens)
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for _, region in self._open:
            if region:
                self.inside[region].append((tag, found))
        if found.get("id"):
            self.ids[found["id"]] += 1
        region = found.get("id") if "data-later-refresh" in found else None
        if "data-later-refresh" in found:
            self.regions.append(region)
            self.inside.setdefault(region or "", [])
        if tag == "script":
            self.scripts.append(found)
        if tag not in VOID:
            self._open.append((tag, region))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop()[0] == tag:
                break


def markup(client: Client, url: str, **headers: str) -> Markup:
    response = client.get(url, **headers)
    assert response.status_code == 200, response.content[:500]
    return Markup(response.content.decode())


@pytest.mark.parametrize(("name", "regions"), [(key, value) for key, value in PAGES.items()])
def test_each_page_marks_its_regions_with_stable_unique_ids_and_loads_the_script(
    viewer_client: Client, name: tuple[str, tuple[str, ...]], regions: set[str]
) -> None:
    seed_jobs()
    page = markup(viewer_client, reverse(name[0], args=name[1]))
    live = [s for s in page.scripts if (s.get("src") or "").endswith(SCRIPT)]
    assert set(page.regions) == regions
    assert all(page.ids[region] == 1 for region in regions), page.ids
    assert len(live) == 1
    assert "defer" in live[0]
    assert live[0]["data-later-refresh-seconds"] == "5"


def test_the_refresh_fetch_answers_the_same_regions_with_fresh_counts(
    viewer_client: Client,
) -> None:
    seed_jobs()
    url = reverse("later_django:dashboard")
    before = viewer_client.get(url).content.decode()
    tasks.add.enqueue(1, 2)
    response = viewer_client.get(url, **REFRESH)
    after = response.content.decode()
    assert response.status_code == 200
    assert set(Markup(after).regions) == DASHBOARD_REGIONS
    assert int(stage_count(after, "enqueued")) == int(stage_count(before, "enqueued")) + 1


def test_a_refresh_fetch_leaves_the_pending_messages_to_the_next_page(
    manager_client: Client,
) -> None:
    done = manager_client.post(reverse("later_django:queue_pause"), {"queue": "emails"})
    url = reverse("later_django:queue_list")
    refreshed = manager_client.get(url, **REFRESH).content.decode()
    loaded = manager_client.get(url).content.decode()
    again = manager_client.get(url).content.decode()
    assert done.status_code == 302
    assert "is paused" not in refreshed
    assert 'id="later-queue-page"' in refreshed
    assert "Queue &#x27;emails&#x27; is paused" in loaded
    assert "is paused:" not in again


def test_a_refresh_fetch_without_a_staff_session_is_sent_to_the_login_page(
    later_db: str,
) -> None:
    # live_refresh.js stops on a redirect (or a 401/403): it never swaps in a login form.
    response = Client().get(reverse("later_django:dashboard"), **REFRESH)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_the_job_list_region_holds_the_bulk_form_so_its_page_ids_follow_the_rows(
    manager_client: Client,
) -> None:
    seeded = seed_jobs()
    page = markup(manager_client, reverse("later_django:job_list", args=["enqueued"]))
    inside = page.inside["later-job-list"]
    forms = [attrs.get("class") for tag, attrs in inside if tag == "form"]
    page_ids = {attrs["value"] for tag, attrs in inside if attrs.get("name") == "page_job_id"}
    boxes = [attrs for tag, attrs in inside if attrs.get("type") == "checkbox"]
    assert forms == ["later-bulk"]
    assert set(seeded.queued) <= page_ids
    assert len(boxes) == len(page_ids)


def test_a_job_page_refresh_shows_its_new_stage_after_a_retry(
    viewer_client: Client, later_db: str
) -> None:
    """The issue's complaint: after Retry the job page said "failed" until reloaded."""
    from later_django.engine.job_actions import one_job

    failed = seed_jobs().failed
    url = reverse("later_django:job_detail", args=[failed])
    page = markup(viewer_client, url)
    assert set(page.regions) == {"later-job-page"} and page.ids["later-job-page"] == 1
    one_job.retry_failed(later_db, "default", failed)
    refreshed = viewer_client.get(url, **REFRESH).content.decode()
    region = refreshed.split('id="later-job-page"', 1)[1].split("<h3>Actions</h3>", 1)[0]
    assert "<tr><th>Stage</th><td>enqueued</td></tr>" in region
