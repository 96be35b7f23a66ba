"""The dashboard's layout in a real browser: on a phone (375 px) and a desktop (1280 px)
no table header is split (tables scroll inside their box, the page itself never
scrolls sideways), and with a dark colour scheme the panels, charts and tables are
dark with light text. Screenshots: ``test-output/browser/dashboard-{375,1280}.png``
and ``dashboard-dark-375.png``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.browser.conftest import TIMEOUT_MS
from tests.browser.login import log_in
from tests.browser.png import read_png

PAGES = ("/admin/", "/admin/later_django/", "/admin/later_django/jobs/enqueued/")

#: Per visible header cell of a later_django table: its text, whether its content fits its
#: width, and on how many lines its text lies.
HEADER_CELLS = """() => Array.from(document.querySelectorAll('.later-table th'))
  .filter(th => th.offsetParent !== null && th.innerText.trim())
  .map(th => {
    const range = document.createRange();
    range.selectNodeContents(th);
    const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
    return {text: th.innerText.trim(), fits: th.scrollWidth <= th.clientWidth + 1,
            lines: tops.size};
  })"""

#: The first non-transparent background of an element or its ancestors.
BACKGROUND = """element => {
  for (let node = element; node; node = node.parentElement) {
    const colour = getComputedStyle(node).backgroundColor;
    if (colour && colour !== 'transparent' && !colour.endsWith(', 0)')) return colour;
  }
  return getComputedStyle(document.documentElement).backgroundColor;
}"""


def luminance(colour: str) -> float:
    """Relative brightness 0 (black) … 1 (white) of ``rgb(…)``/``rgba(…)``."""
    channels = colour[colour.index("(") + 1 : colour.index(")")].split(",")
    red, green, blue = (float(value) / 255 for value in channels[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


@contextmanager
def browser_page(browser, width: int, scheme: str = "light") -> Iterator[object]:
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.mark.parametrize("width", [375, 1280])
def test_no_header_is_split_and_the_page_fits_its_width(
    browser, seeded_site, output_directory, width: int
) -> None:
    with browser_page(browser, width) as page:
        log_in(page, seeded_site.base)
        found = {}
        for path in PAGES:
            page.goto(f"{seeded_site.base}{path}")
            found[path] = (
                page.evaluate(HEADER_CELLS),
                page.evaluate("() => document.documentElement.scrollWidth"),
            )
        page.goto(f"{seeded_site.base}/admin/")
        chart_box = page.locator("#later-panel-throughput-chart svg").bounding_box()
        screenshot = output_directory / f"dashboard-{width}.png"
        screenshot.unlink(missing_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
    for path, (cells, page_width) in found.items():
        assert len(cells) >= 7, (path, cells)  # the job list alone has 7 headers
        split = [cell for cell in cells if not cell["fits"] or cell["lines"] != 1]
        assert not split, (path, split)
        assert page_width <= width, f"{path} is {page_width} px wide in a {width} px window"
    index_headers = {cell["text"].upper() for cell in found["/admin/"][0]}
    assert {"PARTITION", "BACKLOG", "LEASE OWNER", "HEAD JOB"} <= index_headers
    assert chart_box is not None and chart_box["width"] >= 300 and chart_box["height"] > 150
    image = read_png(screenshot)
    assert image.width == width, "a full-page screenshot as wide as the window: no overflow"
    assert image.height >= 900
    assert screenshot.stat().st_size > 20_000
    assert image.distinct_byte_values > 64


@pytest.mark.parametrize("path", ["/admin/", "/admin/later_django/"])
def test_a_dark_colour_scheme_gives_dark_panels_with_light_text(
    browser, seeded_site, output_directory, path: str
) -> None:
    colours = {}
    for scheme in ("light", "dark"):
        with browser_page(browser, 375, scheme) as page:
            log_in(page, seeded_site.base)
            page.goto(f"{seeded_site.base}{path}")
            colours[scheme] = {
                "panel": page.eval_on_selector("#later-panel-history", BACKGROUND),
                "chart text": page.eval_on_selector(
                    "#later-panel-history svg .later-chart-y-axis text",
                    "element => getComputedStyle(element).fill",
                ),
                "table": page.eval_on_selector("#later-panel-stages td", BACKGROUND),
                "cell text": page.eval_on_selector(
                    "#later-panel-stages td.num", "element => getComputedStyle(element).color"
                ),
                "success line": page.eval_on_selector(
                    "#later-panel-throughput-chart svg polyline",
                    "element => getComputedStyle(element).stroke",
                ),
            }
            if scheme == "dark" and path == "/admin/":
                screenshot = output_directory / "dashboard-dark-375.png"
                screenshot.unlink(missing_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
                image = read_png(screenshot)
                assert image.width == 375 and image.distinct_byte_values > 64
    light, dark = colours["light"], colours["dark"]
    assert luminance(light["panel"]) > 0.8 and luminance(light["cell text"]) < 0.4, light
    assert luminance(dark["panel"]) < 0.2, dark
    assert luminance(dark["table"]) < 0.25, dark
    assert luminance(dark["chart text"]) > 0.6, dark
    assert luminance(dark["cell text"]) > 0.6, dark
    assert dark["success line"] != light["success line"], "the lines have a dark-scheme colour"
    assert luminance(dark["success line"]) > luminance(light["success line"])
