"""Bulk actions from the job lists: the list's form, the confirmation page (a dry
run's count, the filter in words, what will happen), and the confirmed POST (CSRF,
``later_django.manage_jobs``, ``confirm=yes``) on the selected rows, the page, or
all jobs matching the filter, in batches and bounded per request."""

from __future__ import annotations

import html as html_lib
import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from later_django.admin import bulk
from later_django.api import enqueue_many
from later_django.storage.stores import stores_for
from tests.admin.test_actions import record_of
from tests.engine import tasks
from tests.engine.support import run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

CONFIRMED = {"confirm": "yes"}
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


def bulk_url(stage: str) -> str:
    return reverse("later_django:job_bulk", args=[stage])


def list_url(stage: str) -> str:
    return reverse("later_django:job_list", args=[stage])


def failed(n: int, task=tasks.fail_once_without_retry) -> list[str]:
    ids = enqueue_many(task, [((f"boom {i}",), {}) for i in range(n)], ids_only=True)
    run_burst()
    return ids


def delayed(task, n: int) -> list[str]:
    later = task.using(run_after=timezone.now() + timedelta(hours=1))
    return enqueue_many(later, [((i, 0), {}) for i in range(n)], ids_only=True)


def stages_of(alias: str, ids: list[str]) -> list[str | None]:
    return [None if (r := record_of(alias, i)) is None else r.stage for i in ids]


def confirm_form(html: str) -> list[tuple[str, str]]:
    """The hidden fields of the confirmation page's form (the CSRF token left out)."""
    form = html.split('<form method="post"', 1)[1].split("</form>", 1)[0]
    return [(n, html_lib.unescape(v)) for n, v in HIDDEN.findall(form)]


def post_fields(fields: list[tuple[str, str]]) -> dict[str, list[str]]:
    data: dict[str, list[str]] = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    return data


def shown_text(response) -> str:
    return html_lib.unescape(response.content.decode())


def test_the_list_offers_the_stages_actions_with_a_checkbox_per_row(
    manager_client: Client, viewer_client: Client, later_db: str
) -> None:
    ids = failed(2)
    html = manager_client.get(list_url("failed")).content.decode()
    form = html.split('class="later-bulk"', 1)[1].split("</form>", 1)[0]
    assert f'action="{bulk_url("failed")}"' in html
    for job_id in ids:
        assert f'<input type="checkbox" name="job_id" value="{job_id}"' in form
        assert f'<input type="hidden" name="page_job_id" value="{job_id}">' in form
    assert '<option value="retry">Retry</option>' in form
    assert '<option value="delete">Delete</option>' in form
    assert '<option value="run_now">' not in form and '<option value="cancel">' not in form
    assert "every row on this page" in form
    assert "all 2 failed jobs" in form, "the stage count, from the counters"
    delayed(tasks.add, 1)
    delayed_html = manager_client.get(list_url("delayed")).content.decode()
    assert '<option value="run_now">Run now</option>' in delayed_html
    assert '<option value="cancel">Cancel</option>' in delayed_html
    assert '<option value="retry">' not in delayed_html
    assert 'class="later-bulk"' not in viewer_client.get(list_url("failed")).content.decode()


def test_the_confirmation_page_counts_by_a_dry_run_and_changes_nothing(
    manager_client: Client, later_db: str
) -> None:
    ids = failed(3)
    failed(1, task=tasks.fail_with_server_policy)
    query = {"action": "retry", "scope": "matching", "task": "tests.engine.tasks.fail_once*"}
    response = manager_client.get(bulk_url("failed"), query)
    assert response.status_code == 200
    text = shown_text(response)
    assert "Retry all matching failed jobs?" in text
    assert "failed jobs of a task whose path starts with 'tests.engine.tasks.fail_once'" in text
    assert "<th>Found now</th><td>3</td>" in text
    assert "<th>Would change</th><td>3</td>" in text
    assert "enqueued again and runs once more" in text
    assert ("confirm", "yes") in confirm_form(response.content.decode())
    assert stages_of(later_db, ids) == ["failed"] * 3


def test_a_post_without_the_confirmation_does_nothing(
    manager_client: Client, later_db: str
) -> None:
    ids = failed(2)
    for extra in ({}, {"confirm": "no"}):
        data = {"action": "retry", "scope": "matching", **extra}
        response = manager_client.post(bulk_url("failed"), data)
        assert response.status_code == 400
        assert "Nothing was done: a bulk action needs the confirmation" in shown_text(response)
    assert stages_of(later_db, ids) == ["failed", "failed"]


def test_the_bulk_action_needs_the_manage_permission(viewer_client: Client, later_db: str) -> None:
    ids = failed(1)
    data = {"action": "retry", "scope": "matching", **CONFIRMED}
    assert viewer_client.get(bulk_url("failed"), data).status_code == 403
    assert viewer_client.post(bulk_url("failed"), data).status_code == 403
    assert stages_of(later_db, ids) == ["failed"]


def test_the_bulk_action_needs_the_csrf_token(csrf_manager_client: Client, later_db: str) -> None:
    ids = failed(1)
    data = {"action": "retry", "scope": "matching", **CONFIRMED}
    refused = csrf_manager_client.post(bulk_url("failed"), data)
    assert refused.status_code == 403 and b"CSRF" in refused.content
    assert stages_of(later_db, ids) == ["failed"]
    page = csrf_manager_client.get(bulk_url("failed"), {"action": "retry", "scope": "matching"})
    token = str(page.context["csrf_token"])
    fields = post_fields(confirm_form(page.content.decode()))
    accepted = csrf_manager_client.post(
        bulk_url("failed"), {**fields, "csrfmiddlewaretoken": token}
    )
    assert accepted.status_code == 302
    assert stages_of(later_db, ids) == ["enqueued"]


def test_the_selected_rows_and_only_those(manager_client: Client, later_db: str) -> None:
    ids = failed(3)
    query = {"action": "retry", "scope": "selected", "job_id": [ids[0], ids[2]]}
    page = manager_client.get(bulk_url("failed"), query)
    assert "Retry 2 selected failed jobs?" in shown_text(page)
    fields = confirm_form(page.content.decode())
    assert ("job_id", ids[0]) in fields and ("job_id", ids[2]) in fields
    done = manager_client.post(bulk_url("failed"), post_fields(fields), follow=True)
    assert "Retry: 2 matched, 2 retried, 0 refused, in 1 batch." in shown_text(done)
    assert stages_of(later_db, ids) == ["enqueued", "failed", "enqueued"]


def test_every_row_on_the_page(manager_client: Client, later_db: str) -> None:
    ids = delayed(tasks.add, 2)
    query = {"action": "run_now", "scope": "page", "page_job_id": ids, "job_id": ids[0]}
    fields = confirm_form(manager_client.get(bulk_url("delayed"), query).content.decode())
    done = manager_client.post(bulk_url("delayed"), post_fields(fields), follow=True)
    assert "Run now: 2 matched, 2 enqueued to run now, 0 refused" in shown_text(done)
    assert stages_of(later_db, ids) == ["enqueued", "enqueued"]


def test_all_matching_takes_the_filter_and_leaves_the_rest(
    manager_client: Client, later_db: str
) -> None:
    emails = delayed(tasks.add_on_emails, 2)
    others = delayed(tasks.add, 2)
    data = {"action": "cancel", "scope": "matching", "queue": "emails", **CONFIRMED}
    done = manager_client.post(bulk_url("delayed"), data)
    assert done.status_code == 302
    assert done["Location"] == f"{list_url('delayed')}?queue=emails"
    shown = shown_text(manager_client.get(done["Location"]))
    assert "Cancel: 2 matched, 2 cancelled, 0 refused, in 1 batch." in shown
    assert stages_of(later_db, emails) == ["cancelled", "cancelled"]
    assert stages_of(later_db, others) == ["delayed", "delayed"]


def test_all_matching_runs_in_batches_and_reports_refusals(
    manager_client: Client, later_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BATCH_SIZE", 2)
    ids = delayed(tasks.add, 5)
    from later_django.api import continue_with

    continue_with(ids[2], tasks.add, 1, 2)
    data = {"action": "delete", "scope": "matching", **CONFIRMED}
    done = manager_client.post(bulk_url("delayed"), data, follow=True)
    text = shown_text(done)
    assert "Delete: 5 matched, 4 deleted, 1 refused, in 3 batches." in text
    assert f"Job {ids[2]} has 1 continuation(s) waiting for it" in text
    assert stages_of(later_db, ids) == [None, None, "delayed", None, None]


def test_a_large_run_stops_at_its_bound_and_continues_after_a_confirmation(
    manager_client: Client, later_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "BATCH_SIZE", 2)
    monkeypatch.setattr(bulk, "ROWS_PER_REQUEST", 3)
    ids = failed(5)
    first = manager_client.post(
        bulk_url("failed"), {"action": "retry", "scope": "matching", **CONFIRMED}
    )
    assert first.status_code == 302
    following = urlsplit(first["Location"])
    assert following.path == bulk_url("failed")
    assert parse_qs(following.query)["cursor"]
    assert stages_of(later_db, ids).count("enqueued") == 3
    page = manager_client.get(first["Location"])
    text = shown_text(page)
    assert "Retry: 3 matched, 3 retried, 0 refused, in 2 batches." in text
    assert "Stopped after looking at 3 jobs, the bound of one request" in text
    assert "the next failed jobs" in text
    second = manager_client.post(
        bulk_url("failed"), post_fields(confirm_form(page.content.decode()))
    )
    assert second["Location"] == list_url("failed")
    assert stages_of(later_db, ids) == ["enqueued"] * 5


def test_relative_times_are_fixed_when_confirmed(manager_client: Client, later_db: str) -> None:
    failed(1)
    page = manager_client.get(
        bulk_url("failed"), {"action": "retry", "scope": "matching", "since": "1h"}
    )
    since = dict(confirm_form(page.content.decode()))["since"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00", since)
    assert "that entered the stage at or after" in shown_text(page)


@pytest.mark.parametrize(
    ("stage", "query", "said"),
    [
        ("failed", {"action": "explode", "scope": "matching"}, "action 'explode' is not a bulk"),
        ("failed", {"action": "run_now", "scope": "matching"}, "Run now does not apply to failed"),
        ("failed", {"action": "retry", "scope": "all"}, "scope 'all' is not one"),
        ("failed", {"action": "retry", "scope": "selected"}, "no job was selected"),
        (
            "failed",
            {"action": "retry", "scope": "selected", "job_id": "<b>"},
            "'<b>' is not a job id",
        ),
        (
            "failed",
            {"action": "retry", "scope": "matching", "since": "soon"},
            "since 'soon' is not a time",
        ),
    ],
)
def test_a_request_the_list_cannot_run_says_why_and_does_nothing(
    manager_client: Client, later_db: str, stage: str, query: dict[str, str], said: str
) -> None:
    ids = failed(1)
    response = manager_client.post(bulk_url(stage), {**query, **CONFIRMED}, follow=True)
    assert response.redirect_chain[0][0].startswith(list_url(stage))
    assert f"Nothing was done: {said}" in shown_text(response)
    assert stages_of(later_db, ids) == ["failed"]


def test_nothing_matching_offers_no_button(manager_client: Client, later_db: str) -> None:
    failed(1)
    page = manager_client.get(
        bulk_url("failed"), {"action": "retry", "scope": "matching", "queue": "nowhere"}
    )
    assert "No job matches" in shown_text(page)
    assert '<form method="post"' not in page.content.decode()
    assert stores_for(later_db).index.job_index_stage_counts("default") == {"failed": 1}


def test_a_bulk_link_opens_the_confirmation_of_all_matching(
    manager_client: Client, later_db: str
) -> None:
    """The failure groups' "Retry all…" links to the failed list with ``bulk=retry``."""
    ids = failed(1)
    query = {"task": "tests.engine.tasks.fail_once_without_retry", "bulk": "retry"}
    response = manager_client.get(list_url("failed"), {**query, "error": "tests.engine.tasks.Boom"})
    assert response.status_code == 302
    target = urlsplit(response["Location"])
    assert target.path == bulk_url("failed")
    assert parse_qs(target.query) == {
        "action": ["retry"],
        "scope": ["matching"],
        "task": ["tests.engine.tasks.fail_once_without_retry"],
        "error": ["tests.engine.tasks.Boom"],
    }
    page = manager_client.get(response["Location"])
    assert "<th>Found now</th><td>1</td>" in shown_text(page)
    assert stages_of(later_db, ids) == ["failed"]
