"""The Workflows pages in a real browser: the list and a workflow's page with its DAG,
photographed at 1280 and 375 px under ``test-output/browser/`` (each picture checked:
size, not blank), the figure's boxes links to their jobs, and a phone's page no
wider than its screen (the figure scrolls in its own box).

The example project with no job, then two order pipelines (charge → reserve stock in
three warehouses → ship) enqueued by ``manage.py shell``: the first run by a burst
worker, with one warehouse failing (so ship fails with it), the second left waiting.
"""

from __future__ import annotations

from tests.browser.example_site import manage
from tests.browser.login import log_in
from tests.browser.test_operator_walk import DASHBOARD, shoot

PIPELINES = """
from django.core.management import call_command
from demo import tasks
from later_django.workflow import Workflow

def pipeline(name, failing):
    flow = Workflow(name)
    flow.add("charge", tasks.greet, "charge")
    for warehouse in ("north", "south", "east"):
        task = tasks.always_fails if warehouse == failing else tasks.greet
        flow.add(f"reserve_{warehouse}", task, warehouse, after=["charge"])
    flow.add("ship", tasks.greet, "ship", after=["reserve_north", "reserve_south", "reserve_east"])
    flow.enqueue()
    return flow.id

pipeline("order 1041", "south")
call_command("later_worker", "--burst", verbosity=0)
print(pipeline("order 1042", None))
"""


def test_the_workflow_pages_photographed_at_both_widths(
    browser, empty_site, output_directory
) -> None:
    base = empty_site.base
    waiting = manage(empty_site.database, "shell", "-c", PIPELINES).stdout.strip().splitlines()[-1]
    taken = []
    for width in (1280, 375):
        context = browser.new_context(viewport={"width": width, "height": 900})
        try:
            page = context.new_page()
            log_in(page, base)
            answer = page.goto(f"{base}{DASHBOARD}workflows/")
            assert answer is not None and answer.status == 200
            assert page.locator("tr.later-workflow").count() == 2
            assert page.locator("tr.later-state-failed").count() == 1
            taken.append(shoot(page, output_directory, f"page-workflows-{width}"))
            page.click(f"a[href$='/workflows/{waiting}/']")
            boxes = page.locator("svg.later-flow a.later-node")
            assert boxes.count() == 5
            assert "1 of 1 parent" in page.inner_text("ul.later-flow-waiting")
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            assert scroll_width <= width, f"{scroll_width} px wide in a {width} px window"
            taken.append(shoot(page, output_directory, f"page-workflow-{width}"))
            boxes.first.click()
            assert "/admin/later_django/job/" in page.url
            assert page.locator("td.later-job-workflow a").count() == 1
        finally:
            context.close()
    assert len(taken) == 4
