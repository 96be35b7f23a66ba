"""An operator in a real browser: what failed in the last hour, why, and make it run again.

The example project after ``demo_seed`` (its five ``always_fails`` jobs failed under a
burst worker, whose attempts the failures page counts). The walk: the Failures page
shows the group (task, error class, count, a traceback), its "Failed jobs" link lists
them filtered by task and class, "all matching" + Retry leads to a confirmation page
with the count, the confirmation retries them, and the dashboard, left open, follows
a worker running them without a reload. Then every page is photographed at 1280 and
375 px under ``test-output/browser/`` and each picture checked (size, not blank).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import Site, _site
from tests.browser.example_site import manage
from tests.browser.login import log_in
from tests.browser.png import read_png
from tests.browser.test_live_refresh import wait_for_text

TASK = "demo.tasks.always_fails"
ERROR = "demo.tasks.DemoFailure"
SEEDED_FAILED = 5
DASHBOARD = "/admin/later_django/"
FAILED_COUNT = "#later-panel-stages tr.later-stage-failed td.num"
ENQUEUED_COUNT = "#later-panel-stages tr.later-stage-enqueued td.num"
#: A worker run plus a refresh interval (5 s) and a fetch.
CHANGE_SHOWS_MS = 30_000


@pytest.fixture
def failed_site(tmp_path: Path, chromium_path: str, migrated_example: Path) -> Iterator[Site]:
    """A seeded example project of this test's own (the walk changes its jobs)."""
    yield from _site(migrated_example, tmp_path, seed=True)


def shoot(page, directory: Path, name: str) -> Path:
    """A full-page screenshot ``<name>.png`` in ``directory``, checked as a real image."""
    picture = directory / f"{name}.png"
    picture.unlink(missing_ok=True)
    page.screenshot(path=str(picture), full_page=True)
    image = read_png(picture)
    width = page.viewport_size["width"]
    assert image.width == width, f"{name}: {image.width} px wide in a {width} px window"
    assert image.height >= 300, name
    assert picture.stat().st_size > 10_000, name
    assert image.distinct_byte_values > 64, f"{name} looks blank"
    return picture


def test_what_failed_why_and_run_it_again(page, failed_site, output_directory) -> None:
    seen = walk(page, failed_site, output_directory, "walk")

    # Five failed jobs listed, five retried, five failed again on the dashboard, which
    # followed the worker without a reload.
    assert seen == {
        "listed": SEEDED_FAILED,
        "retried": SEEDED_FAILED,
        "failed_after": SEEDED_FAILED,
        "reloads": 0,
    }


def walk(page, site: Site, output_directory: Path, prefix: str) -> dict[str, int]:
    """The operator's walk on ``site`` (seeded, its own), its pictures named
    ``<prefix>-<n>-...``; also run on MariaDB (``test_mariadb_walk.py``). Returns what
    the operator saw: the failed jobs listed and retried, the dashboard's failed count
    after the worker ran them again, and the page loads meanwhile."""
    base = site.base
    log_in(page, base)
    page.goto(f"{base}{DASHBOARD}")

    page.click("nav.later-page-nav >> text=Failures")
    group = page.locator("tr.later-failure-group", has_text=TASK)
    assert group.locator("td.later-error-class").inner_text() == ERROR
    assert group.locator("td.later-failure-count").inner_text() == str(SEEDED_FAILED)
    traceback = page.locator("tr.later-failure-traceback pre").first.text_content()
    assert "fails on purpose, without retries" in traceback
    shoot(page, output_directory, f"{prefix}-1-failures")

    group.locator("a.later-failed-list").click()
    page.wait_for_url(f"{base}{DASHBOARD}jobs/failed/?*")
    listed = page.locator("table.later-jobs tbody tr")
    listed_count = listed.count()
    assert listed_count == SEEDED_FAILED
    assert all(TASK in text for text in listed.all_inner_texts())
    assert page.input_value("input[name=task]") == TASK
    assert page.input_value("input[name=error]") == ERROR
    shoot(page, output_directory, f"{prefix}-2-failed-list")

    page.check("input[name=scope][value=matching]")
    page.select_option("select[name=action]", "retry")
    page.click("button:has-text('Review…')")
    facts = page.locator("table.later-bulk-facts")
    found_now = facts.locator("tr", has_text="Found now").locator("td").inner_text()
    would_change = facts.locator("tr", has_text="Would change").locator("td").inner_text()
    jobs_in_words = facts.locator("tr", has_text="Jobs").first.locator("td").inner_text()
    assert (found_now, would_change) == (str(SEEDED_FAILED), str(SEEDED_FAILED))
    assert TASK in jobs_in_words and ERROR in jobs_in_words
    shoot(page, output_directory, f"{prefix}-3-confirmation")
    page.click("button:has-text('Yes, retry')")
    assert page.locator("ul.messagelist li.success").count() == 1

    page.goto(f"{base}{DASHBOARD}")
    page.evaluate("window.laterMarker = 'loaded once'")
    loads: list[str] = []
    page.on("load", lambda loaded: loads.append(loaded.url))
    failed_before, enqueued_before = page.inner_text(FAILED_COUNT), page.inner_text(ENQUEUED_COUNT)
    manage(site.database, "later_worker", "--burst", "--concurrency", "4")
    wait_for_text(page, FAILED_COUNT, str(SEEDED_FAILED), CHANGE_SHOWS_MS)
    shoot(page, output_directory, f"{prefix}-4-dashboard-after")

    assert failed_before == "0"
    assert int(enqueued_before) >= SEEDED_FAILED  # the seed's own queued jobs besides
    assert page.evaluate("window.laterMarker") == "loaded once" and loads == []
    return {
        "listed": listed_count,
        "retried": int(found_now),
        "failed_after": int(page.inner_text(FAILED_COUNT)),
        "reloads": len(loads),
    }


#: Every page of the dashboard (besides a job's), by the name of its pictures.
PAGES = {
    "dashboard": DASHBOARD,
    "queues": f"{DASHBOARD}queues/",
    "workers": f"{DASHBOARD}workers/",
    "recurring": f"{DASHBOARD}recurring/",
    "tasks": f"{DASHBOARD}tasks/?range=day",
    "task": f"{DASHBOARD}tasks/{TASK}/?range=day",
    "failures": f"{DASHBOARD}failures/?range=day",
    "failed-list": f"{DASHBOARD}jobs/failed/",
    "bulk-confirmation": f"{DASHBOARD}jobs/failed/bulk/?action=retry&scope=matching",
}


def test_every_page_photographed_at_both_widths(browser, seeded_site, output_directory) -> None:
    base = seeded_site.base
    pages = PAGES
    taken = []
    for width in (1280, 375):
        context = browser.new_context(viewport={"width": width, "height": 900})
        try:
            page = context.new_page()
            log_in(page, base)
            for name, path in pages.items():
                answer = page.goto(f"{base}{path}")
                assert answer is not None and answer.status == 200, (path, answer)
                taken.append(shoot(page, output_directory, f"page-{name}-{width}"))
            page.goto(f"{base}{pages['failed-list']}")
            page.click("table.later-jobs tbody tr a >> nth=0")
            taken.append(shoot(page, output_directory, f"page-job-{width}"))
        finally:
            context.close()
    assert len(taken) == 2 * (len(pages) + 1)


def test_a_job_page_fits_the_narrowest_phone(browser, seeded_site, output_directory) -> None:
    """The page title holds the job's 26-character id, one word wider than a 320 px
    screen in the admin's title font: it must wrap, not widen the page (at 375 px it
    did for about half of the ids)."""
    context = browser.new_context(viewport={"width": 320, "height": 700})
    try:
        page = context.new_page()
        log_in(page, seeded_site.base)
        page.goto(f"{seeded_site.base}{DASHBOARD}jobs/failed/")
        page.click("table.later-jobs tbody tr a >> nth=0")
        page.wait_for_url("**/job/*/")
        job_id = page.url.rstrip("/").rsplit("/", 1)[1]
        title = page.locator("#content h1")
        assert len(job_id) == 26 and job_id in title.inner_text()
        # The title wraps inside its box (nothing overflows it), and the page is no
        # wider than the screen.
        assert title.evaluate("h1 => h1.scrollWidth <= h1.clientWidth"), title.inner_text()
        box = title.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 320, box
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 320
        shoot(page, output_directory, "page-job-320")
    finally:
        context.close()
