"""The Workflows pages: the list (counts, state, the state filter, cursor pages), a
workflow's page (its DAG with links, what waiting jobs wait on, jobs left out of the
figure) and its Cancel and Retry buttons; on both databases, with the real engine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from later_django.admin import workflow_detail, workflow_lists
from later_django.core.clock import now_ms
from later_django.core.records import new_job_id
from later_django.engine import workflow_rest
from later_django.storage.stores import stores_for
from later_django.workflow import Workflow, get_workflow
from tests.admin.test_actions import record_of
from tests.engine import tasks
from tests.engine.support import run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

LIST = reverse("later_django:workflow_list")


def page_url(workflow_id: str) -> str:
    return reverse("later_django:workflow_detail", args=[workflow_id])


def action_url(workflow_id: str, action: str) -> str:
    return reverse("later_django:workflow_action", args=[workflow_id, action])


def confirm_url(workflow_id: str, action: str) -> str:
    return reverse("later_django:workflow_confirm", args=[workflow_id, action])


def job_url(job_id: str) -> str:
    return reverse("later_django:job_detail", args=[job_id])


def one_step(name: str, queue: str = "default") -> Workflow:
    """A workflow of one ``add`` step on ``queue``, enqueued (not run)."""
    flow = Workflow(name)
    flow.add("only", tasks.add.using(queue_name=queue), 1, 2)
    flow.enqueue()
    return flow


def shipment(lines: Path) -> tuple[Workflow, dict[str, str]]:
    """charge (queue ``default``) and two stock steps (queue ``emails``, which the
    tests' burst workers do not run) → ship after all three; charge has run."""
    flow = Workflow("order 1042")
    flow.add("charge", tasks.add, 1, 1)
    other = tasks.record.using(queue_name="emails")
    flow.add("stock_b", other, str(lines), "b")
    flow.add("stock_c", other, str(lines), "c")
    flow.add("ship", tasks.record, str(lines), "ship", after=["charge", "stock_b", "stock_c"])
    jobs = {name: result.id for name, result in flow.enqueue().items()}
    run_until_finished([jobs["charge"]])
    return flow, jobs


def failed_flow(lines: Path) -> tuple[Workflow, dict[str, str]]:
    """ok (succeeds) → broken (fails) → after (failed by it): run to rest."""
    flow = Workflow("broken one")
    flow.add("ok", tasks.add, 2, 2)
    flow.add("broken", tasks.fail_once_without_retry, "it broke", after=["ok"])
    flow.add("after", tasks.record, str(lines), "after", after=["broken"])
    jobs = {name: result.id for name, result in flow.enqueue().items()}
    run_until_finished(jobs.values())
    return flow, jobs


def drawing(content: str) -> str:
    """The workflow's figure in a page."""
    start = content.index('<svg class="later-tree later-flow"')
    return content[start : content.index("</svg>", start)]


def rows(content: bytes) -> list[str]:
    """The workflow ids of the list's lines, in order."""
    return re.findall(
        r'<tr class="later-workflow[^"]*">\s*<td><a href="[^"]*"><code>(\w+)</code>',
        content.decode(),
    )


def test_the_list_shows_each_workflow_with_its_counts_and_state(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    done, _ = failed_flow(tmp_path / "lines")
    running, _ = shipment(tmp_path / "lines")
    response = manager_client.get(LIST)
    assert response.status_code == 200
    content = response.content.decode()
    assert reverse("later_django:workflow_list") in content  # the nav names the page
    assert rows(response.content) == [running.id, done.id]  # newest first
    assert f'href="{page_url(done.id)}"' in content
    assert "broken one" in content and "order 1042" in content
    first, second = content.split('<tr class="later-workflow ')[1:]
    assert "failed" in second and "success 1 · failed 2" in second
    assert "running" in first and "waiting 1 · enqueued 2 · success 1" in first
    # The running line shows how long it has been running; the one at rest, not yet
    # settled by the workflows pass, shows nothing; once settled, its duration.
    assert re.search(r'<td class="num">running for \d', first)
    assert '<td class="num">\N{EN DASH}</td>' in second
    workflow_rest.settle(stores_for(later_db), "default", now_ms(), 60_000, 10)
    settled = manager_client.get(LIST).content.decode().split('<tr class="later-workflow ')[2]
    # human_duration: "850 ms", "1.3 s" (MariaDB's burst workers took over a second).
    assert re.search(r'<td class="num">\d+(\.\d)? (ms|s|min)</td>', settled)


def test_the_state_filter_keeps_the_workflows_in_that_state(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    failed, _ = failed_flow(tmp_path / "lines")
    running = one_step("waits", queue="emails")
    succeeded = one_step("runs")
    run_until_finished([job for job in _jobs(later_db, succeeded.id)])
    assert rows(manager_client.get(LIST, {"state": "failed"}).content) == [failed.id]
    assert rows(manager_client.get(LIST, {"state": "succeeded"}).content) == [succeeded.id]
    assert rows(manager_client.get(LIST, {"state": "cancelled"}).content) == []
    bad = manager_client.get(LIST, {"state": "<b>lost</b>"})
    assert bad.status_code == 400
    assert b"is not one of running, failed" in bad.content and b"<b>lost" not in bad.content
    assert rows(manager_client.get(LIST).content) == [succeeded.id, running.id, failed.id]


def _jobs(alias: str, workflow_id: str) -> list[str]:
    from later_django.engine.workflows import job_ids
    from later_django.storage.stores import stores_for

    return job_ids(stores_for(alias), "default", workflow_id)


def test_pages_walk_every_workflow_once_newest_first(
    manager_client: Client, later_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow_lists, "PAGE_SIZE", 2)
    made = [one_step(f"flow {n}").id for n in range(5)]
    seen: list[str] = []
    url = LIST
    while url:
        response = manager_client.get(url)
        assert response.status_code == 200
        page = rows(response.content)
        assert 1 <= len(page) <= 2
        seen += page
        found = re.search(r'class="later-next" href="([^"]+)"', response.content.decode())
        url = LIST + found.group(1).replace("&amp;", "&") if found else ""
    assert seen == list(reversed(made))
    assert manager_client.get(LIST, {"cursor": "not-an-id"}).status_code == 400


def test_a_state_filter_stops_at_its_bound_and_says_where(
    manager_client: Client, later_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow_lists, "WALK_CAP", 3)
    monkeypatch.setattr(workflow_lists, "CHUNK", 2)
    failed, _ = failed_flow(tmp_path / "lines")
    waiting = [one_step(f"flow {n}").id for n in range(4)]
    first = manager_client.get(LIST, {"state": "failed"}).content.decode()
    assert rows(first.encode()) == []
    assert "Looked at the newest 3 workflows" in first
    found = re.search(r'class="later-continue" href="([^"]+)"', first)
    assert found is not None and waiting[1] in found.group(1)
    rest = manager_client.get(LIST + found.group(1).replace("&amp;", "&"))
    assert rows(rest.content) == [failed.id]


def test_the_workflow_page_draws_every_job_with_its_link_and_what_waiting_jobs_wait_on(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    flow, jobs = shipment(tmp_path / "lines")
    response = manager_client.get(page_url(flow.id))
    assert response.status_code == 200
    content = response.content.decode()
    svg = drawing(content)
    for name, job_id in jobs.items():
        assert f'<a href="{job_url(job_id)}" class="later-node later-node-' in svg, name
    assert svg.count('class="later-node ') == 4
    assert svg.count("<line ") == 3  # charge, stock_b, stock_c → ship
    assert 'later-node later-node-success"' in svg and "later-node-waiting" in svg
    expected = f"2 of 3 parents: record#{jobs['stock_b'][-8:]}, #{jobs['stock_c'][-8:]}"
    assert expected in content
    assert "order 1042" in content
    assert "waiting 1 · enqueued 2 · success 1" in re.sub(r"<[^>]+>", "", content)
    # A job's page links to its workflow.
    job_page = manager_client.get(job_url(jobs["ship"])).content.decode()
    assert f'href="{page_url(flow.id)}"' in job_page


def test_a_batch_page_links_its_callbacks(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    from later_django.batches import batch, callback

    with batch(on_success=callback(tasks.record_outcome, str(tmp_path / "c"), "ok")) as opened:
        tasks.add.enqueue(1, 1)
    fire = opened.callbacks["on_success"].id
    content = manager_client.get(page_url(opened.id)).content.decode()
    assert "on_success: " in content and f'href="{job_url(fire)}"' in content


def test_a_workflow_over_the_drawable_size_says_how_many_it_left_out_and_lists_them(
    manager_client: Client, later_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflow_detail, "DRAWN", 3)
    monkeypatch.setattr(workflow_detail, "READ", 5)
    flow = Workflow("wide")
    for n in range(7):
        flow.add(f"s{n}", tasks.add, n, n)
    flow.enqueue()
    ids = _jobs(later_db, flow.id)
    content = manager_client.get(page_url(flow.id)).content.decode()
    svg = drawing(content)
    assert svg.count('class="later-node ') == 3
    assert "4 of 7 jobs are left out of the figure" in content
    table = content[content.index('id="later-flow-left-out"') :]
    for job_id in ids[3:5]:
        assert f'href="{job_url(job_id)}"' in table
    assert "And 2 more jobs not read" in content


def test_the_pages_are_for_staff_only(later_db: str) -> None:
    flow = one_step("x")
    anonymous = Client()
    clerk = Client()
    clerk.force_login(User.objects.create_user("clerk", password="secret", is_staff=False))
    for client in (anonymous, clerk):
        for url in (LIST, page_url(flow.id), confirm_url(flow.id, "cancel")):
            response = client.get(url)
            assert response.status_code == 302 and "/login/" in response["Location"], url
        assert client.post(action_url(flow.id, "cancel"), {"confirm": "yes"}).status_code == 302
    assert record_of(later_db, _jobs(later_db, flow.id)[0]).stage == "enqueued"


def test_the_actions_are_post_only_need_the_permission_and_the_confirmation(
    manager_client: Client, viewer_client: Client, csrf_manager_client: Client, later_db: str
) -> None:
    flow = one_step("x")
    (job_id,) = _jobs(later_db, flow.id)
    forged = csrf_manager_client.post(action_url(flow.id, "cancel"), {"confirm": "yes"})
    assert forged.status_code == 403 and b"CSRF" in forged.content
    assert manager_client.get(action_url(flow.id, "cancel")).status_code == 405
    assert viewer_client.post(action_url(flow.id, "cancel"), {"confirm": "yes"}).status_code == 403
    assert viewer_client.get(confirm_url(flow.id, "cancel")).status_code == 403
    # The viewer sees the page but no buttons.
    assert (
        confirm_url(flow.id, "cancel") not in viewer_client.get(page_url(flow.id)).content.decode()
    )
    for data in ({}, {"confirm": "no"}, {"confirm": ["yes", "yes"]}):
        unconfirmed = manager_client.post(action_url(flow.id, "cancel"), data)
        assert unconfirmed.status_code == 400
        assert b"Nothing was done" in unconfirmed.content
    assert record_of(later_db, job_id).stage == "enqueued"


def test_cancel_cancels_what_has_not_run(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    flow, jobs = shipment(tmp_path / "lines")
    detail = manager_client.get(page_url(flow.id)).content.decode()
    assert confirm_url(flow.id, "cancel") in detail
    confirmation = manager_client.get(confirm_url(flow.id, "cancel"))
    assert confirmation.status_code == 200 and b"Yes, cancel it" in confirmation.content
    assert record_of(later_db, jobs["ship"]).stage == "waiting"  # a GET changes nothing
    done = manager_client.post(action_url(flow.id, "cancel"), {"confirm": "yes"}, follow=True)
    assert b"3 job(s) cancelled" in done.content
    assert record_of(later_db, jobs["charge"]).stage == "success"
    for name in ("stock_b", "stock_c", "ship"):
        assert record_of(later_db, jobs[name]).stage == "cancelled", name
    state = get_workflow(flow.id)
    assert state is not None and state.state == "cancelled"


def test_retry_reruns_the_failed_and_what_lies_below(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    flow, jobs = failed_flow(tmp_path / "lines")
    detail = manager_client.get(page_url(flow.id)).content.decode()
    assert confirm_url(flow.id, "retry") in detail and confirm_url(flow.id, "cancel") not in detail
    assert b"Yes, retry it" in manager_client.get(confirm_url(flow.id, "retry")).content
    done = manager_client.post(action_url(flow.id, "retry"), {"confirm": "yes"}, follow=True)
    assert b"2 job(s) will run again" in done.content
    assert record_of(later_db, jobs["ok"]).stage == "success"
    assert record_of(later_db, jobs["broken"]).stage == "enqueued"
    assert record_of(later_db, jobs["after"]).stage == "waiting"
    # A retry of a workflow still moving is refused, and says so.
    refused = manager_client.post(action_url(flow.id, "retry"), {"confirm": "yes"}, follow=True)
    assert b"Nothing was done" in refused.content and b"not finished" in refused.content


def test_an_unknown_or_malformed_id_or_action_is_404(manager_client: Client, later_db: str) -> None:
    flow = one_step("x")
    for workflow_id in (new_job_id(), "not-a-ulid", "x" * 300, flow.id.lower()):
        assert manager_client.get(page_url(workflow_id)).status_code == 404, workflow_id
        assert manager_client.get(confirm_url(workflow_id, "cancel")).status_code == 404
        assert (
            manager_client.post(action_url(workflow_id, "retry"), {"confirm": "yes"}).status_code
            == 404
        )
    assert manager_client.get(confirm_url(flow.id, "delete")).status_code == 404
    assert manager_client.post(action_url(flow.id, "delete"), {"confirm": "yes"}).status_code == 404


def test_the_reads_are_by_key_in_a_fixed_number_of_statements(
    later_db: str, tmp_path: Path
) -> None:
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    flow, _ = shipment(tmp_path / "lines")
    for n in range(3):
        one_step(f"flow {n}")
    with CaptureQueriesContext(connections[later_db]) as page_reads:
        page = workflow_lists.workflow_page(later_db, "default")
    # The row keys walked backwards, the rows by key, ONE walk of every count.
    assert len(page_reads.captured_queries) == 3
    assert len(page.lines) == 4 and page.lines[-1].workflow.counts == {
        "waiting": 1,
        "enqueued": 2,
        "success": 1,
    }
    with CaptureQueriesContext(connections[later_db]) as detail_reads:
        detail = workflow_detail.read_detail(later_db, "default", flow.id)
    # The row, its counts, its jobs range, their records.
    assert len(detail_reads.captured_queries) == 4
    assert detail is not None and len(detail.drawn) == 4
