"""From the admin login to a failure's Retry in the clicks docs/dashboard.md promises.

The admin login lands on the admin index (django-admin-tools' dashboard with
later_django's panels). Its Stages panel opens with a row of links to the operator
pages, so the Failures page is one click away, and from there:

* one failed job: **Failures** → the group's newest job → **Retry**: three clicks;
* every failed job of a group: **Failures** → **Retry all…** → **Yes, retry them**:
  three clicks.

Each click is counted from the landing page (logging in is not a click of the walk);
a page load is awaited after each, and the outcome (the success message, the failed
count) is checked by reading pages, not by clicking.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import Site, _site
from tests.browser.login import log_in

TASK = "demo.tasks.always_fails"
SEEDED_FAILED = 5
#: What docs/dashboard.md promises, from the admin index after login.
CLICKS_TO_RETRY = 3
LANDING = "/admin/"
FAILED_COUNT = "#later-panel-stages tr.later-stage-failed td.num"


@pytest.fixture
def failed_site(tmp_path: Path, chromium_path: str, migrated_example: Path) -> Iterator[Site]:
    """A seeded example project of this test's own (its retries change the jobs)."""
    yield from _site(migrated_example, tmp_path, seed=True)


class Clicks:
    """Clicks on ``page``, counted; each waits for the page it leads to."""

    def __init__(self, page) -> None:
        self.page = page
        self.count = 0

    def click(self, target) -> None:
        locator = self.page.locator(target) if isinstance(target, str) else target
        locator.click()
        self.page.wait_for_load_state()
        self.count += 1


def failed_count(page, base: str) -> int:
    page.goto(f"{base}/admin/later_django/")
    return int(page.inner_text(FAILED_COUNT))


def test_a_failures_retry_is_three_clicks_from_the_login_landing_page(page, failed_site) -> None:
    base = failed_site.base
    log_in(page, base)
    assert page.url == f"{base}{LANDING}"
    links = page.locator("nav.later-index-links a")
    assert links.all_inner_texts() == [
        "Dashboard",
        "Failures",
        "Queues",
        "Workers",
        "Tasks",
        "Recurring",
        "Workflows",
    ]

    # One failed job: Failures, the group's newest job, Retry.
    clicks = Clicks(page)
    clicks.click(links.filter(has_text="Failures"))
    group = page.locator("tr.later-failure-group", has_text=TASK)
    clicks.click(group.locator("td.later-sample a"))
    assert "/admin/later_django/job/" in page.url
    clicks.click("form[action$='/retry/'] button")
    assert "was enqueued again" in page.inner_text("ul.messagelist li.success")
    assert clicks.count == CLICKS_TO_RETRY
    assert failed_count(page, base) == SEEDED_FAILED - 1

    # Every failed job of the group: Failures, Retry all…, Yes, retry them.
    page.goto(f"{base}{LANDING}")
    clicks = Clicks(page)
    clicks.click(page.locator("nav.later-index-links a", has_text="Failures"))
    group = page.locator("tr.later-failure-group", has_text=TASK)
    clicks.click(group.locator("a.later-retry-all"))
    assert page.locator("table.later-bulk-facts").count() == 1
    clicks.click("button:has-text('Yes, retry them')")
    assert f"{SEEDED_FAILED - 1} retried" in page.inner_text("ul.messagelist li.success")
    assert clicks.count == CLICKS_TO_RETRY
    assert failed_count(page, base) == 0
