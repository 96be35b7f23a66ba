"""Live refresh in a real browser: the dashboard's counts follow the data while the page
stays open, with no navigation; a region where the user ticked a box is left alone; no
fetch while the tab is hidden and one at once when it is shown; the Live button's
choice holds on every page, and a table scrolled sideways on a phone keeps its offset.

The site refreshes every second (``quick_refresh_site``; users get 5 s): the waits that
must outlast the timer are counted in intervals, and "at once" is measured in the
browser, against the interval."""

from __future__ import annotations

import time

from tests.browser.example_site import Browserless
from tests.browser.login import log_in

DASHBOARD = "/admin/later_django/"
#: The site's interval (tests.browser.quick_refresh_settings.REFRESH_SECONDS; the Live
#: button's label shows it, which the tests check).
INTERVAL_SECONDS = 1
INTERVAL_MS = INTERVAL_SECONDS * 1000
#: A change shows within one interval and a fetch (generous: two shared cores).
CHANGE_SHOWS_MS = 15_000
ENQUEUED = "#later-panel-stages tr.later-stage-enqueued td.num"
READY = "#later-panel-throughput table.later-queues td.num"
QUEUE_READY = "#later-queue-page td.later-ready"
QUEUE_BOX = "#later-queue-page .later-scroll"
JOB_ROWS = "#later-job-list table.later-jobs tbody tr"
#: Hides or shows the tab; returns the page's clock (ms) just before the event.
SET_HIDDEN = """hidden => {
    Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
    Object.defineProperty(document, "visibilityState",
        {configurable: true, get: () => (hidden ? "hidden" : "visible")});
    const at = performance.now();
    document.dispatchEvent(new Event("visibilitychange"));
    return at;
}"""
#: Notes the page's clock at every click (capture phase: before the button's handler).
NOTE_CLICKS = """() => document.addEventListener(
    "click", () => (window.laterClickedAt = performance.now()), true)"""
#: When (page clock, ms) the first refresh fetch at or after ``since`` started, from the
#: browser's resource timing; null when none did.
FIRST_FETCH_SINCE = """since => {
    const starts = performance.getEntriesByType("resource")
        .filter(entry => entry.initiatorType === "fetch" && entry.name === location.href
                && entry.startTime >= since)
        .map(entry => entry.startTime);
    return starts.length ? Math.min(...starts) : null;
}"""


class RefreshRequests:
    """The page's refresh fetches (requests carrying ``X-Later-Refresh``), as they start."""

    def __init__(self, page) -> None:
        self.started: list[float] = []
        page.on("request", self._seen)

    def _seen(self, request) -> None:
        if request.headers.get("x-later-refresh") == "1":
            self.started.append(time.monotonic())

    def since(self, moment: float) -> int:
        return sum(1 for started in self.started if started >= moment)


def enqueue(site_base: str, jobs: int) -> None:
    """``jobs`` jobs through the demo page's "One job" button, from outside the browser."""
    client = Browserless(site_base)
    for _ in range(jobs):
        client.post_form("/", "/enqueue/one/")


def wait_for_text(page, selector: str, text: str, timeout_ms: int = CHANGE_SHOWS_MS) -> None:
    page.wait_for_function(
        "([selector, text]) => document.querySelector(selector)?.textContent.trim() === text",
        arg=[selector, text],
        timeout=timeout_ms,
    )


def fetch_delay_ms(page, since_ms: float) -> float | None:
    """How long after ``since_ms`` (page clock) the first refresh fetch started."""
    started = page.evaluate(FIRST_FETCH_SINCE, since_ms)
    return None if started is None else started - since_ms


def test_the_counts_change_without_a_reload_and_no_fetch_happens_while_hidden(
    page, quick_refresh_site
) -> None:
    base = quick_refresh_site.base
    log_in(page, base)
    page.goto(f"{base}{DASHBOARD}")
    loads: list[str] = []
    page.on("load", lambda loaded: loads.append(loaded.url))
    requests = RefreshRequests(page)
    page.evaluate("window.laterMarker = 'the page loaded once'")
    control = page.inner_text(".later-live", timeout=5_000)
    enqueued_at_first = page.inner_text(ENQUEUED)

    enqueue(base, 3)
    wait_for_text(page, ENQUEUED, "3")

    # A ticked box (rows selected for a bulk action) keeps its region as it is, while
    # the other regions go on refreshing; untick it and leave it, and the region follows.
    page.evaluate(
        "document.querySelector('#later-panel-stages').insertAdjacentHTML("
        "'beforeend', '<input type=checkbox id=later-probe>')"
    )
    page.check("#later-probe")
    enqueue(base, 2)
    wait_for_text(page, READY, "5")
    enqueued_while_ticked = page.inner_text(ENQUEUED)
    still_ticked = page.evaluate("document.querySelector('#later-probe')?.checked === true")
    page.uncheck("#later-probe")
    page.click("#later-panel-db-size h2")  # the focus leaves the box
    wait_for_text(page, ENQUEUED, "5")

    page.evaluate(SET_HIDDEN, True)
    hidden_at = time.monotonic()
    enqueue(base, 2)
    page.wait_for_timeout(3 * INTERVAL_MS)  # three intervals
    fetched_while_hidden = requests.since(hidden_at)
    enqueued_while_hidden = page.inner_text(ENQUEUED)

    shown_at = time.monotonic()  # before: the fetch starts inside the event's handler
    shown_at_ms = page.evaluate(SET_HIDDEN, False)
    wait_for_text(page, ENQUEUED, "7", timeout_ms=3_000)
    fetched_when_shown = requests.since(shown_at)
    # At once, not one interval later (as a timer set on showing would fetch).
    fetch_after_shown_ms = fetch_delay_ms(page, shown_at_ms)

    assert control == f"Live · every {INTERVAL_SECONDS} s"
    assert enqueued_at_first == "0"
    assert enqueued_while_ticked == "3" and still_ticked
    assert fetched_while_hidden == 0
    assert enqueued_while_hidden == "5"
    assert fetched_when_shown >= 1
    assert fetch_after_shown_ms is not None and fetch_after_shown_ms < INTERVAL_MS / 2, (
        fetch_after_shown_ms
    )
    assert len(requests.started) >= 4
    assert page.evaluate("window.laterMarker") == "the page loaded once"
    assert loads == []
    assert page.url == f"{base}{DASHBOARD}"


def test_the_live_button_pauses_the_refresh_on_every_page_and_remembers_it(
    page, quick_refresh_site
) -> None:
    base = quick_refresh_site.base
    log_in(page, base)
    enqueue(base, 1)
    page.goto(f"{base}{DASHBOARD}")
    requests = RefreshRequests(page)
    page.click(".later-live", timeout=5_000)
    paused = page.inner_text(".later-live"), page.get_attribute(".later-live", "aria-pressed")
    stored = page.evaluate("localStorage.getItem('later_django.live_refresh')")
    # On a phone the queue table scrolls sideways in its box; a refresh keeps the offset.
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(f"{base}/admin/later_django/queues/")
    on_queues = page.inner_text(".later-live")
    scrolled_to = page.eval_on_selector(QUEUE_BOX, "box => (box.scrollLeft = 200, box.scrollLeft)")
    paused_at = time.monotonic()
    enqueue(base, 1)
    page.wait_for_timeout(2 * INTERVAL_MS)  # two intervals
    fetched_while_paused = requests.since(paused_at)
    ready_while_paused = page.inner_text(QUEUE_READY)
    page.evaluate(NOTE_CLICKS)
    page.click(".later-live")
    live_again = page.inner_text(".later-live")
    wait_for_text(page, QUEUE_READY, "2", timeout_ms=3_000)
    # The click fetches at once, not one interval later.
    fetch_after_click_ms = fetch_delay_ms(page, page.evaluate("window.laterClickedAt"))
    scrolled_after = page.eval_on_selector(QUEUE_BOX, "box => box.scrollLeft")

    assert paused == ("Live · paused", "false")
    assert stored == "off"
    assert on_queues == "Live · paused"
    assert fetched_while_paused == 0
    assert ready_while_paused == "1"
    assert live_again == f"Live · every {INTERVAL_SECONDS} s"
    assert requests.since(paused_at) >= 1
    assert fetch_after_click_ms is not None and fetch_after_click_ms < INTERVAL_MS / 2, (
        fetch_after_click_ms
    )
    assert scrolled_to == 200
    assert scrolled_after == scrolled_to


def test_the_job_list_follows_new_jobs_but_keeps_rows_the_user_ticked(
    page, quick_refresh_site
) -> None:
    base = quick_refresh_site.base
    log_in(page, base)
    enqueue(base, 1)
    page.goto(f"{base}/admin/later_django/jobs/enqueued/")
    requests = RefreshRequests(page)
    page.evaluate("window.laterMarker = 'the page loaded once'")
    rows_at_first = page.locator(JOB_ROWS).count()

    enqueue(base, 2)  # the bulk form's untouched action menu does not hold the list
    wait_for_rows(page, 3)

    page.check(f"{JOB_ROWS} input[type=checkbox] >> nth=0")
    ticked_at = time.monotonic()
    enqueue(base, 1)
    poll_until = time.monotonic() + CHANGE_SHOWS_MS / 1000
    while requests.since(ticked_at) < 2 and time.monotonic() < poll_until:
        page.wait_for_timeout(250)
    page.wait_for_timeout(1_000)  # the second fetch's answer is in
    rows_while_ticked = page.locator(JOB_ROWS).count()
    fetched_while_ticked = requests.since(ticked_at)
    still_ticked = page.is_checked(f"{JOB_ROWS} input[type=checkbox] >> nth=0")
    page.uncheck(f"{JOB_ROWS} input[type=checkbox] >> nth=0")
    page.click("h2")  # the focus leaves the box
    wait_for_rows(page, 4)

    assert rows_at_first == 1
    assert fetched_while_ticked >= 2
    assert rows_while_ticked == 3 and still_ticked
    assert page.evaluate("window.laterMarker") == "the page loaded once"


def wait_for_rows(page, rows: int) -> None:
    page.wait_for_function(
        "([selector, rows]) => document.querySelectorAll(selector).length === rows",
        arg=[JOB_ROWS, rows],
        timeout=CHANGE_SHOWS_MS,
    )
