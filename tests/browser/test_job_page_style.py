"""The job page's buttons are the admin's own and readable, and a phone sees whole job rows.

Colours are read as Chromium computes them (``getComputedStyle``), in the admin's light
and dark schemes, and their contrast ratio is worked out as WCAG 2 defines it: every
button's text at least 4.5:1 against its own background (AA for normal text). The lists
at 375 px: the page is no wider than the screen and each row's full task path shows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.browser.conftest import TIMEOUT_MS
from tests.browser.login import log_in
from tests.browser.test_operator_walk import DASHBOARD, shoot

AA_NORMAL_TEXT = 4.5
PHONE_WIDTH = 375

#: The colours of an element as painted: its text, and the first background that is not
#: transparent from it up (a link's own, else its container's), as [r, g, b, alpha].
PAINTED = """
element => {
  const rgba = text => (text.match(/[\\d.]+/g) || []).map(Number).concat([1]).slice(0, 4);
  let background = [0, 0, 0, 0];
  for (let node = element; node; node = node.parentElement) {
    background = rgba(getComputedStyle(node).backgroundColor);
    if (background[3] > 0) break;
  }
  if (background[3] === 0) background = [255, 255, 255, 1];
  return {text: rgba(getComputedStyle(element).color), background: background,
          decoration: getComputedStyle(element).textDecorationLine,
          label: element.textContent.trim(), classes: element.className};
}
"""

#: The admin's own colour variables, as computed on the page.
ADMIN_COLOURS = """
() => {
  const probe = document.createElement("span");
  document.body.appendChild(probe);
  const read = name => { probe.style.color = `var(${name})`;
    return getComputedStyle(probe).color.match(/[\\d.]+/g).map(Number).slice(0, 3); };
  const found = {default: read("--default-button-bg"), plain: read("--button-bg"),
                 delete: read("--delete-button-bg"), fg: read("--button-fg")};
  probe.remove();
  return found;
}
"""


def relative_luminance(rgb: list[float]) -> float:
    """WCAG 2's relative luminance of an sRGB colour given as 0-255 channels."""

    def linear(channel: float) -> float:
        value = channel / 255
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(channel) for channel in rgb[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast_ratio(first: list[float], second: list[float]) -> float:
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_the_contrast_ratio_is_wcags() -> None:
    assert contrast_ratio([0, 0, 0], [255, 255, 255]) == pytest.approx(21.0)
    assert contrast_ratio([255, 255, 255], [255, 255, 255]) == pytest.approx(1.0)
    # The old "Delete…": the admin's red link text on its blue button.
    assert contrast_ratio([204, 52, 52], [65, 118, 144]) < 1.5


@pytest.fixture(params=["light", "dark"])
def scheme_page(request, browser) -> Iterator[tuple[object, str]]:
    """A 1280 px page in the admin's light or dark scheme (``prefers-color-scheme``),
    and the scheme's name."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, color_scheme=request.param
    )
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context.new_page(), request.param
    finally:
        context.close()


def first_job_page(page, base: str, stage: str) -> None:
    page.goto(f"{base}{DASHBOARD}jobs/{stage}/")
    page.click("table.later-jobs tbody tr td.later-job-id a >> nth=0")
    page.wait_for_url("**/job/*/")


def painted_buttons(page, selector: str) -> list[dict]:
    return [button.evaluate(PAINTED) for button in page.locator(selector).all()]


def assert_readable(buttons: list[dict]) -> None:
    for button in buttons:
        ratio = contrast_ratio(button["text"], button["background"])
        assert ratio >= AA_NORMAL_TEXT, (button, round(ratio, 2))


def test_the_job_pages_buttons_are_the_admins_and_readable(
    scheme_page, seeded_site, output_directory
) -> None:
    (page, scheme), base = scheme_page, seeded_site.base
    log_in(page, base)
    admin = None
    shown: dict[str, dict] = {}
    for stage in ("failed", "delayed"):
        first_job_page(page, base, stage)
        admin = page.evaluate(ADMIN_COLOURS)
        buttons = painted_buttons(page, ".later-actions .button")
        shown.update({button["label"]: button for button in buttons})
        assert_readable(buttons)
    shoot(page, output_directory, f"job-actions-{scheme}")

    assert sorted(shown) == ["Cancel…", "Delete…", "Retry", "Run now"]
    assert admin is not None
    # Retry and Run now: the admin's default button; Cancel…: its plain one; Delete…:
    # white on the admin's delete red (its submit row's delete button), not red on blue.
    for label in ("Retry", "Run now"):
        assert shown[label]["background"][:3] == admin["default"], shown[label]
    assert shown["Cancel…"]["background"][:3] == admin["plain"]
    assert shown["Delete…"]["background"][:3] == admin["delete"]
    assert all(button["text"][:3] == admin["fg"] for button in shown.values()), shown
    # A link drawn as a button is not underlined like the text links around it.
    assert all(button["decoration"] == "none" for button in shown.values()), shown


def test_the_confirmations_danger_buttons_are_readable(scheme_page, seeded_site) -> None:
    (page, _), base = scheme_page, seeded_site.base
    log_in(page, base)
    first_job_page(page, base, "delayed")
    job_page = page.url
    confirmations = []
    for link in ("Cancel…", "Delete…"):
        page.goto(job_page)
        page.click(f".later-actions a:has-text('{link}')")
        page.wait_for_selector("button.later-danger")
        confirmations += painted_buttons(page, "button.later-danger")
    assert [button["label"] for button in confirmations] == ["Yes, cancel it", "Yes, delete it"]
    assert_readable(confirmations)


def row_fits(row) -> dict:
    return row.evaluate(
        """row => {
          const task = row.querySelector("td.later-task");
          const box = task.getBoundingClientRect();
          return {task: task.innerText, right: box.right, visible: box.width > 0,
                  clipped: task.scrollWidth > task.clientWidth};
        }"""
    )


@pytest.mark.parametrize("stage", ["failed", "enqueued", "delayed"])
def test_a_phone_sees_each_job_row_whole(browser, seeded_site, output_directory, stage) -> None:
    """At 375 px the job list wraps each row (the id, then task, queue, error under it)
    instead of cutting the table at the screen's edge."""
    context = browser.new_context(viewport={"width": PHONE_WIDTH, "height": 800})
    try:
        page = context.new_page()
        log_in(page, seeded_site.base)
        page.goto(f"{seeded_site.base}{DASHBOARD}jobs/{stage}/")
        rows = page.locator("table.later-jobs tbody tr")
        assert rows.count() > 0
        width = page.evaluate("() => document.documentElement.scrollWidth")
        fits = [row_fits(row) for row in rows.all()[:10]]
        shoot(page, output_directory, f"job-list-{stage}-{PHONE_WIDTH}")
    finally:
        context.close()
    assert width <= PHONE_WIDTH
    for fit in fits:
        assert fit["task"].startswith("demo.tasks."), fit
        assert fit["visible"] and fit["right"] <= PHONE_WIDTH and not fit["clipped"], fit
