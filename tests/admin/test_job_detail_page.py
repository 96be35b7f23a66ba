"""The job page: when a delayed job runs, each attempt (duration, worker, error), why a
job gave up at once, and the continuation tree of parents, siblings and continuations,
on both databases."""

from __future__ import annotations

import html as html_module
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from later_django.api import after, continue_with
from tests.engine import give_up_tasks, tasks
from tests.engine.support import run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def page(client: Client, job_id: str) -> str:
    answer = client.get(reverse("later_django:job_detail", args=[job_id]))
    assert answer.status_code == 200
    return answer.content.decode()


def test_a_delayed_job_says_when_it_runs(manager_client: Client, later_db: str) -> None:
    later = timezone.now() + timedelta(minutes=30)
    job = tasks.add.using(run_after=later).enqueue(1, 2)
    html = page(manager_client, job.id)
    found = re.search(r'class="later-run-at">([^<]*)<', html)
    assert found, "no Runs at row"
    assert later.strftime("%Y-%m-%d %H:%M") in found.group(1)
    assert re.search(r"\(in (29|30) min\)", found.group(1)), found.group(1)


def test_each_attempt_shows_its_duration_worker_outcome_and_error(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    job = tasks.fail_first_time.enqueue(str(tmp_path / "marks"))
    run_until_finished([job.id])
    html = page(manager_client, job.id)
    rows = re.findall(r'<tr class="later-attempt">(.*?)</tr>', html, re.S)
    assert len(rows) == 2
    first, second = rows
    assert "retried" in first and "#later-error-1" in first
    assert "tests.engine.tasks.Boom" in first
    assert "succeeded" in second and "later-error" not in second
    for row in rows:
        assert re.search(r'class="num later-ran-for">\d+ ms<', row), row
        assert re.search(r"<code>[^<]+:\d+:[^<]+</code>", row), row  # host:pid:suffix
    assert 'id="later-error-1"' in html  # the link's target: the traceback


def test_the_tree_shows_parent_siblings_and_continuations_linked(
    manager_client: Client, later_db: str
) -> None:
    parent = tasks.add.enqueue(1, 1)
    job = continue_with(parent, tasks.add, 2, 2)
    sister = continue_with(parent, tasks.add, 3, 3)
    children = [continue_with(job, tasks.add, n, n) for n in range(3)]
    html = page(manager_client, job.id)
    svg = html.split('<svg class="later-tree"', 1)[1].split("</svg>", 1)[0]
    linked = set(re.findall(r'<a href="/admin/later_django/job/([0-9A-Z]{26})/"', svg))
    assert linked == {parent.id, job.id, sister.id, *(child.id for child in children)}
    assert 'class="later-node later-node-waiting later-node-current"' in svg
    assert svg.count("<line ") == 2 + 3  # parent→job, parent→sister, job→each child


def test_a_parents_tree_links_its_waiting_fan_in_child(
    manager_client: Client, later_db: str
) -> None:
    """A fan-in child (``api.after``) is in each parent's children range, marked; the
    parent's page shows it by its id, linked."""
    parent, other = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    child = after([parent, other], tasks.add, 3, 3)
    html = page(manager_client, parent.id)
    svg = html.split('<svg class="later-tree"', 1)[1].split("</svg>", 1)[0]
    linked = set(re.findall(r'<a href="/admin/later_django/job/([0-9A-Z]{26})/"', svg))
    assert linked == {parent.id, child.id}
    assert "&amp;" not in svg


def test_a_fan_in_childs_page_lists_its_parents_and_how_many_finished(
    manager_client: Client, later_db: str
) -> None:
    first = tasks.add.enqueue(1, 1)
    # Queue "reports": the burst worker below serves only "default".
    second, third = (tasks.add.using(queue_name="reports").enqueue(n, n) for n in range(2))
    child = after([first, second, third], tasks.add, 9, 9)
    run_until_finished([first.id])
    found = re.search(r'<td class="later-parents">(.*?)</td>', page(manager_client, child.id), re.S)
    assert found, "no Parents row"
    row = found.group(1)
    assert row.startswith("1 of 3 finished (runs on success): ")
    linked = re.findall(r'<a href="/admin/later_django/job/([0-9A-Z]{26})/"', row)
    assert linked == [first.id, second.id, third.id]
    assert f"{first.id}</code></a> success" in row
    assert f"{second.id}</code></a> enqueued" in row


def test_a_job_without_parent_or_continuation_has_no_tree(
    manager_client: Client, later_db: str
) -> None:
    job = tasks.add.enqueue(1, 1)
    assert '<svg class="later-tree"' not in page(manager_client, job.id)


def test_the_tree_of_a_hundred_continuations_holds_all_of_them(
    manager_client: Client, later_db: str
) -> None:
    parent = tasks.add.enqueue(1, 1)
    children = [continue_with(parent, tasks.add, n, n) for n in range(100)]
    html = page(manager_client, parent.id)
    svg = html.split('<svg class="later-tree"', 1)[1].split("</svg>", 1)[0]
    assert svg.count("<line ") == 100
    assert all(child.id in svg for child in children)


def test_a_job_that_gave_up_by_its_policys_rule_says_so(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    job = give_up_tasks.give_up_on_missing.enqueue(str(tmp_path / "runs"), "model")
    run_until_finished([job.id])
    found = re.search(r'<td class="later-reason">([^<]*)</td>', page(manager_client, job.id))
    assert found, "no Reason row"
    assert html_module.unescape(found.group(1)) == (
        "Gave up at once on attempt 1 (3 retries left): "
        "django.contrib.auth.models.User.DoesNotExist is a "
        "django.core.exceptions.ObjectDoesNotExist, which is in the retry policy's give_up_on"
    )


def test_a_job_that_ran_out_of_retries_has_no_reason(
    manager_client: Client, later_db: str, tmp_path: Path
) -> None:
    job = give_up_tasks.give_up_on_missing.enqueue(str(tmp_path / "runs"), "boom")
    run_until_finished([job.id])
    html = page(manager_client, job.id)
    assert html.count('class="later-attempt"') == 4
    assert "later-reason" not in html
