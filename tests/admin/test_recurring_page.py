"""The recurring page: schedule, next run, last runs with outcomes, Run now, Disable and
Enable (POST, CSRF, the manage permission)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from django.test import Client
from django.urls import reverse

from later_django import api
from later_django.admin.units import NONE_TEXT
from later_django.engine.recurring import RECENT_RUNS
from tests.engine.support import run_until_finished
from tests.recurring import tasks
from tests.recurring.support import definition, occurrences, store

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

PAGE_URL = "/admin/later_django/recurring/"


def row_of(html: str, recurring_id: str) -> str:
    found = re.search(
        rf'<tr class="later-recurring-row[^"]*" data-id="{recurring_id}">.*?</tr>', html, re.S
    )
    assert found, f"no row for {recurring_id!r}"
    return found.group(0)


def post(client: Client, action: str, recurring_id: str):
    return client.post(reverse(f"later_django:{action}"), {"recurring_id": recurring_id})


def test_the_urls_are_named() -> None:
    assert reverse("later_django:recurring_list") == PAGE_URL
    assert reverse("later_django:recurring_run_now") == PAGE_URL + "run-now/"


def test_each_definition_shows_its_schedule_next_run_and_state(
    manager_client: Client, later_db: str
) -> None:
    api.schedule_recurring("minutely", "* * * * *", tasks.plain, 1, timezone="Europe/Paris")
    api.schedule_recurring("nightly", "0 3 * * *", tasks.plain, 2, sequential=True)
    api.disable_recurring("nightly")
    html = manager_client.get(PAGE_URL).content.decode()
    minutely, nightly = row_of(html, "minutely"), row_of(html, "nightly")
    assert (
        "<code>* * * * *</code> Europe/Paris" in minutely
        and "tests.recurring.tasks.plain" in minutely
    )
    # The next tick, within a minute (59.6 s and more reads "1 min").
    assert re.search(r"in (\d+(\.\d)? m?s|1 min)<", minutely), minutely
    assert "enabled" in minutely and ">Disable<" in minutely
    assert "disabled" in nightly and ">Enable<" in nightly and "sequential" in nightly
    assert f'class="later-next-run">{NONE_TEXT}' in nightly  # no next run while disabled
    assert 'class="later-recurring-row later-disabled"' in nightly


def test_run_now_from_the_page_enqueues_and_lists_the_run_with_its_outcome(
    manager_client: Client, later_db: str
) -> None:
    api.schedule_recurring("minutely", "* * * * *", tasks.plain, 3)
    answer = post(manager_client, "recurring_run_now", "minutely")
    assert answer.status_code == 302 and answer.url == PAGE_URL
    (record,) = occurrences(later_db, "minutely")
    page = manager_client.get(PAGE_URL)
    assert f"enqueued to run now as job {record.job_id}" in page.content.decode()
    row = row_of(page.content.decode(), "minutely")
    assert reverse("later_django:job_detail", args=[record.job_id]) in row
    assert "later-stage-enqueued" in row
    run_until_finished([record.job_id])
    row = row_of(manager_client.get(PAGE_URL).content.decode(), "minutely")
    # The run's duration as human_duration writes it: "7 ms", or "1.1 s" (seen on MariaDB
    # with the machine loaded: the burst worker's first job took over a second).
    assert re.search(r"later-stage-success[^>]*>success · \d+(\.\d)? m?s<", row), row


def test_the_last_runs_are_bounded_and_newest_first(manager_client: Client, later_db: str) -> None:
    api.schedule_recurring("minutely", "* * * * *", tasks.plain, 3)
    ran = [api.run_recurring_now("minutely") for _ in range(RECENT_RUNS + 2)]
    row = row_of(manager_client.get(PAGE_URL).content.decode(), "minutely")
    shown = re.findall(r'title="([0-9A-Z]{26})"', row)
    assert shown == list(reversed(ran))[:RECENT_RUNS]


def test_disable_and_enable_from_the_page(manager_client: Client, later_db: str) -> None:
    api.schedule_recurring("minutely", "* * * * *", tasks.plain, 3)
    assert post(manager_client, "recurring_disable", "minutely").status_code == 302
    assert definition(later_db, "minutely").enabled is False
    again = manager_client.get(PAGE_URL).content.decode()
    assert "is disabled: no tick runs until it is enabled" in again
    post(manager_client, "recurring_disable", "minutely")
    assert "was already disabled; nothing changed" in manager_client.get(PAGE_URL).content.decode()
    post(manager_client, "recurring_enable", "minutely")
    assert definition(later_db, "minutely").enabled is True


def test_an_unknown_id_is_named_in_an_error(manager_client: Client, later_db: str) -> None:
    for action in ("recurring_run_now", "recurring_disable", "recurring_enable"):
        post(manager_client, action, "ghost")
        html = manager_client.get(PAGE_URL).content.decode()
        assert "here is no recurring job &#x27;ghost&#x27;" in html  # the admin capitalises it


def test_a_run_now_whose_task_is_gone_is_refused_with_a_message(
    manager_client: Client, later_db: str
) -> None:
    made = api.schedule_recurring("minutely", "* * * * *", tasks.plain, 3)
    store(later_db, replace(made, task_path="tests.recurring.tasks.no_such_task"))
    post(manager_client, "recurring_run_now", "minutely")
    html = manager_client.get(PAGE_URL).content.decode()
    assert "ecurring job &#x27;minutely&#x27; did not run" in html
    assert occurrences(later_db, "minutely") == []


def test_the_actions_need_the_permission_post_and_csrf(
    viewer_client: Client, manager_client: Client, csrf_manager_client: Client, later_db: str
) -> None:
    api.schedule_recurring("minutely", "* * * * *", tasks.plain, 3)
    for action in ("recurring_run_now", "recurring_disable", "recurring_enable"):
        assert post(viewer_client, action, "minutely").status_code == 403
        assert manager_client.get(reverse(f"later_django:{action}")).status_code == 405
        assert post(csrf_manager_client, action, "minutely").status_code == 403
    assert occurrences(later_db, "minutely") == []
    assert definition(later_db, "minutely").enabled is True
    viewer_page = viewer_client.get(PAGE_URL).content.decode()
    assert ">Run now<" not in viewer_page and "minutely" in viewer_page


def test_errors_are_escaped(manager_client: Client, later_db: str) -> None:
    made = api.schedule_recurring("minutely", "* * * * *", tasks.plain, 3)
    store(later_db, replace(made, last_error="<script>alert(1)</script>"))
    html = manager_client.get(PAGE_URL).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_page_needs_a_staff_user(later_db: str) -> None:
    answer = Client().get(PAGE_URL)
    assert answer.status_code == 302 and "/login/" in answer.url


def test_the_nav_and_the_dashboard_panel_link_the_page(
    manager_client: Client, later_db: str
) -> None:
    api.schedule_recurring("minutely", "* * * * *", tasks.plain, 3)
    dashboard = manager_client.get(reverse("later_django:dashboard")).content.decode()
    assert dashboard.count(f'href="{PAGE_URL}"') >= 2  # the nav and the panel's title
