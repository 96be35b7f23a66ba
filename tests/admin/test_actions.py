"""Retry, run now and delete: POST only, CSRF, the manage permission, one transaction."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test import Client
from django.urls import reverse

from later_django.core.keys import children_key, due_key, job_key
from later_django.core.records import decode_record, encode_record
from later_django.engine.job_actions import one_job
from later_django.exceptions import ActionRefused
from later_django.overview.snapshot import read_overview
from later_django.storage.stores import stores_for
from tests.admin.support import seed_jobs
from tests.engine.support import result, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

ACTIONS = ("later_django:job_retry", "later_django:job_run_now", "later_django:job_delete")
#: The POST data of a confirmed delete (the confirmation page's button).
CONFIRMED = {"confirm": "yes"}


def record_of(alias: str, job_id: str):
    raw = stores_for(alias).kv.get(job_key("default", job_id))
    return None if raw is None else decode_record(raw)


def queue_rows(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_delivery_queue")
        return cursor.fetchone()[0]


@pytest.mark.parametrize("action", ACTIONS)
def test_an_action_without_the_permission_is_forbidden(
    viewer_client: Client, later_db: str, action: str
) -> None:
    seeded = seed_jobs()
    target = {"later_django:job_retry": seeded.failed}.get(action, seeded.delayed)
    response = viewer_client.post(reverse(action, args=[target]))
    assert response.status_code == 403
    assert record_of(later_db, target).stage == (
        "failed" if action.endswith("retry") else "delayed"
    )


@pytest.mark.parametrize("action", ACTIONS)
def test_an_action_without_a_csrf_token_is_forbidden(
    csrf_manager_client: Client, later_db: str, action: str
) -> None:
    seeded = seed_jobs()
    target = {"later_django:job_retry": seeded.failed}.get(action, seeded.delayed)
    response = csrf_manager_client.post(reverse(action, args=[target]))
    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert record_of(later_db, target).stage == (
        "failed" if action.endswith("retry") else "delayed"
    )


@pytest.mark.parametrize("action", ACTIONS[:2])
def test_an_action_is_refused_on_get(manager_client: Client, later_db: str, action: str) -> None:
    seeded = seed_jobs()
    response = manager_client.get(reverse(action, args=[seeded.delayed]))
    assert response.status_code == 405


def test_the_action_form_carries_a_csrf_token_that_is_accepted(
    csrf_manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    page = csrf_manager_client.get(reverse("later_django:job_detail", args=[seeded.delayed]))
    token = page.context["csrf_token"]
    response = csrf_manager_client.post(
        reverse("later_django:job_run_now", args=[seeded.delayed]),
        {"csrfmiddlewaretoken": str(token)},
    )
    assert response.status_code == 302
    assert record_of(later_db, seeded.delayed).stage == "enqueued"


def test_retry_enqueues_a_failed_job_and_it_runs_again(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    response = manager_client.post(reverse("later_django:job_retry", args=[seeded.failed]))
    assert response.status_code == 302
    record = record_of(later_db, seeded.failed)
    assert record.stage == "enqueued"
    assert [stage for stage, _ in record.history] == ["enqueued", "running", "failed"]
    assert stores_for(later_db).index.job_index_get("default", seeded.failed) is None
    run_burst()
    again = result(seeded.failed)
    assert again.status == "FAILED"
    assert len(again.errors) == 2
    assert record_of(later_db, seeded.failed).attempts == 2


def test_retry_of_a_job_that_did_not_fail_is_refused_with_a_message(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    response = manager_client.post(
        reverse("later_django:job_retry", args=[seeded.succeeded[0]]), follow=True
    )
    assert "only a failed job can be retried" in response.content.decode()
    assert record_of(later_db, seeded.succeeded[0]).stage == "success"


def test_run_now_enqueues_a_delayed_job_and_removes_its_schedule_entry(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    before = record_of(later_db, seeded.delayed)
    storage = stores_for(later_db)
    due = due_key("default", before.run_after_ms, seeded.delayed)
    assert storage.kv.exist(due)
    response = manager_client.post(reverse("later_django:job_run_now", args=[seeded.delayed]))
    assert response.status_code == 302
    assert not storage.kv.exist(due)
    run_burst()
    assert result(seeded.delayed).status == "SUCCESSFUL"
    assert result(seeded.delayed).return_value == 14
    # Its continuation was released by the finish.
    run_burst()
    assert result(seeded.waiting_child).status == "SUCCESSFUL"


def test_deleting_a_queued_job_removes_record_and_queue_row(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    queue = stores_for(later_db).queue
    rows, depth = queue_rows(later_db), queue.depth("default")
    response = manager_client.post(
        reverse("later_django:job_delete", args=[seeded.queued[0]]), CONFIRMED
    )
    assert response.status_code == 302
    assert record_of(later_db, seeded.queued[0]) is None
    assert queue_rows(later_db) == rows - 1
    assert queue.depth("default") == depth - 1
    listed = manager_client.get(reverse("later_django:job_list", args=["enqueued"]))
    table = listed.content.decode().split('class="later-table later-jobs"', 1)[1]
    assert seeded.queued[0] not in table
    assert seeded.queued[1] in table


def test_deleting_a_waiting_child_removes_it_from_its_parent(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    storage = stores_for(later_db)
    assert storage.kv.range_count(children_key("default", seeded.delayed)) == 1
    manager_client.post(reverse("later_django:job_delete", args=[seeded.waiting_child]), CONFIRMED)
    assert record_of(later_db, seeded.waiting_child) is None
    assert storage.index.job_index_get("default", seeded.waiting_child) is None
    assert storage.kv.range_count(children_key("default", seeded.delayed)) == 0
    assert storage.index.job_index_stage_counts("default").get("waiting", 0) == 0


def test_deleting_a_parent_with_a_waiting_child_is_refused(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    response = manager_client.post(
        reverse("later_django:job_delete", args=[seeded.delayed]), CONFIRMED, follow=True
    )
    assert "continuation(s) waiting for it" in response.content.decode()
    assert record_of(later_db, seeded.delayed).stage == "delayed"


def test_deleting_delayed_and_finished_jobs_removes_record_index_and_schedule(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    storage = stores_for(later_db)
    manager_client.post(reverse("later_django:job_delete", args=[seeded.waiting_child]), CONFIRMED)
    delayed = record_of(later_db, seeded.delayed)
    manager_client.post(reverse("later_django:job_delete", args=[seeded.delayed]), CONFIRMED)
    manager_client.post(reverse("later_django:job_delete", args=[seeded.failed]), CONFIRMED)
    for job_id in (seeded.delayed, seeded.failed):
        assert record_of(later_db, job_id) is None
        assert storage.index.job_index_get("default", job_id) is None
    assert not storage.kv.exist(due_key("default", delayed.run_after_ms, seeded.delayed))
    counts = storage.index.job_index_stage_counts("default")
    assert counts.get("delayed", 0) == 0
    assert counts.get("failed", 0) == 0


def finished_figures(alias: str) -> tuple[int, int]:
    """``(success, failed)`` as the dashboard reads them (the trigger-kept counters),
    checked against the seed's count of unexpired index rows."""
    overview = read_overview(alias, "default")
    figures = overview.count("success"), overview.count("failed")
    counts = stores_for(alias).index.job_index_stage_counts("default")
    assert figures == (counts.get("success", 0), counts.get("failed", 0))
    return figures


def test_the_finished_counters_follow_the_worker_and_the_actions(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()  # running -> success three times, running -> failed once
    assert finished_figures(later_db) == (3, 1)

    # Retry: failed -> enqueued (the index row leaves with the failed stage).
    manager_client.post(reverse("later_django:job_retry", args=[seeded.failed]))
    assert finished_figures(later_db) == (3, 0)
    # The burst runs it again (running -> failed) and the queued jobs (-> success).
    run_burst()
    success, failed = finished_figures(later_db)
    assert failed == 1 and success > 3

    # Delete a failed and a succeeded job.
    manager_client.post(reverse("later_django:job_delete", args=[seeded.failed]), CONFIRMED)
    manager_client.post(reverse("later_django:job_delete", args=[seeded.succeeded[0]]), CONFIRMED)
    assert finished_figures(later_db) == (success - 1, 0)


def test_actions_on_partitioned_jobs_are_refused(later_db: str) -> None:
    seeded = seed_jobs()
    storage = stores_for(later_db)
    record = record_of(later_db, seeded.delayed)
    record.topic, record.partition_id, record.sequence = "orders", 3, 0
    storage.kv.set(job_key("default", seeded.delayed), encode_record(record))
    for action in (one_job.run_now, one_job.delete_job):
        with pytest.raises(ActionRefused, match="partition 3 of topic 'orders'"):
            action(later_db, "default", seeded.delayed)
