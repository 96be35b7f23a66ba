"""The admin dashboard in a real browser against a seeded example project: log in, read
the stage counts, see the queue-length chart, save a screenshot
(``test-output/browser/dashboard.png``) and check it is a real image."""

from __future__ import annotations

from tests.browser.login import log_in
from tests.browser.png import read_png

#: What ``demo_seed`` leaves (its defaults), as the Stages panel must show it: 40 queued
#: jobs and 12 order jobs on topic "orders" are enqueued.
SEEDED = {"delayed": 15, "waiting": 0, "enqueued": 52, "running": 0, "success": 30, "failed": 5}


BLACK = "rgb(0, 0, 0)"


def chart_styles(page) -> tuple[str, str]:
    """The computed fill of the chart's frame and stroke of its queued line: unstyled SVG
    draws a black box with nothing visible on it."""
    frame = page.eval_on_selector(
        "#later-panel-history svg rect", "element => getComputedStyle(element).fill"
    )
    line = page.eval_on_selector(
        "#later-panel-history svg polyline", "element => getComputedStyle(element).stroke"
    )
    return frame, line


def stage_counts(page, panel: str) -> dict[str, int]:
    return {
        stage: int(page.inner_text(f"{panel} tr:has(a:text-is('{stage}')) td.num"))
        for stage in SEEDED
    }


def test_the_admin_dashboard_shows_stage_counts_the_queue_chart_and_the_recurring_job(
    page, seeded_site, output_directory
) -> None:
    log_in(page, seeded_site.base)
    page.goto(f"{seeded_site.base}/admin/")
    stages = page.locator("#later-panel-stages")
    chart = page.locator("#later-panel-history svg")
    stages_visible, chart_visible = stages.is_visible(), chart.is_visible()
    counts = stage_counts(page, "#later-panel-stages")
    chart_box = chart.bounding_box()
    frame_fill, line_stroke = chart_styles(page)
    recurring_panel = page.inner_text("#later-panel-recurring")
    partitions_panel = page.inner_text("#later-panel-partitions")
    queued_points = page.get_attribute("#later-panel-history svg polyline", "points") or ""
    screenshot = output_directory / "dashboard.png"
    screenshot.unlink(missing_ok=True)
    page.screenshot(path=str(screenshot), full_page=True)
    image = read_png(screenshot)
    assert stages_visible and chart_visible
    assert counts == SEEDED
    assert "demo-heartbeat" in recurring_panel
    assert "orders" in partitions_panel
    assert chart_box is not None and chart_box["width"] > 200 and chart_box["height"] > 50
    assert frame_fill != BLACK, "the chart's stylesheet is not loaded: a black box"
    assert line_stroke not in ("none", "", frame_fill)
    # demo_seed's hour of readings, one per minute; the hour chart's 60 slots end with
    # the current minute, so the oldest reading (and one per minute since) falls out.
    assert len(queued_points.split()) >= 55
    assert image.width == 1280 and image.height >= 900
    assert screenshot.stat().st_size > 20_000
    assert image.distinct_byte_values > 64


def test_the_stage_links_lead_to_job_lists_and_the_plain_dashboard(page, seeded_site) -> None:
    log_in(page, seeded_site.base)
    page.goto(f"{seeded_site.base}/admin/")
    page.click("#later-panel-stages a:text-is('failed')")
    page.wait_for_url(f"{seeded_site.base}/admin/later_django/jobs/failed/")
    failed_list = page.locator("#content").inner_text()
    page.goto(f"{seeded_site.base}/admin/later_django/")
    plain_counts = stage_counts(page, "#later-panel-stages")
    plain_frame_fill, _ = chart_styles(page)
    assert plain_frame_fill != BLACK
    assert "demo.tasks.always_fails" in failed_list
    assert plain_counts == SEEDED


def test_a_job_on_the_demo_page_links_to_its_dashboard_page(page, seeded_site) -> None:
    log_in(page, seeded_site.base)
    page.goto(f"{seeded_site.base}/")
    page.click("#recent-jobs tr:has(td:text-is('seed: fails')) a")
    page.wait_for_url(f"{seeded_site.base}/admin/later_django/job/*/")
    detail = page.locator("#content").inner_text()
    assert "demo.tasks.always_fails" in detail
    assert "DemoFailure" in detail
