"""Deleting one job: a confirmation page (GET), then a POST that must carry
``confirm=yes`` and the CSRF token; both need the manage permission."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from later_django.core.keys import job_key
from later_django.core.records import encode_record
from later_django.storage.stores import stores_for
from tests.admin.support import seed_jobs
from tests.admin.test_actions import record_of

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

CONFIRMED = {"confirm": "yes"}


def delete_url(job_id: str) -> str:
    return reverse("later_django:job_delete", args=[job_id])


def still_there(alias: str, job_id: str, stage: str) -> bool:
    record = record_of(alias, job_id)
    return record is not None and record.stage == stage


def test_the_job_page_links_to_the_confirmation_page_instead_of_deleting(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    html = manager_client.get(
        reverse("later_django:job_detail", args=[seeded.failed])
    ).content.decode()
    assert f'href="{delete_url(seeded.failed)}"' in html
    assert f'action="{delete_url(seeded.failed)}"' not in html


def test_get_shows_the_confirmation_and_deletes_nothing(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    page = manager_client.get(delete_url(seeded.delayed))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Delete job" in html and seeded.delayed in html
    assert "<code>tests.engine.tasks.add</code>" in html
    assert "<th>Stage</th><td>delayed</td>" in html
    assert "its schedule entry" in html
    assert '<input type="hidden" name="confirm" value="yes">' in html
    assert "Yes, delete it" in html
    assert still_there(later_db, seeded.delayed, "delayed")


def test_a_post_without_the_confirmation_deletes_nothing(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    for data in ({}, {"confirm": "no"}, {"confirm": ""}):
        response = manager_client.post(delete_url(seeded.failed), data)
        assert response.status_code == 400, data
        assert "Nothing was deleted" in response.content.decode()
        assert still_there(later_db, seeded.failed, "failed")
    assert stores_for(later_db).index.job_index_get("default", seeded.failed) is not None


def test_a_confirmed_post_deletes_the_job(manager_client: Client, later_db: str) -> None:
    seeded = seed_jobs()
    response = manager_client.post(delete_url(seeded.failed), CONFIRMED)
    assert response.status_code == 302
    assert response["Location"] == reverse("later_django:dashboard")
    assert record_of(later_db, seeded.failed) is None
    assert stores_for(later_db).index.job_index_get("default", seeded.failed) is None
    shown = manager_client.get(response["Location"]).content.decode()
    assert f"Job {seeded.failed} was deleted." in shown
    # The job is gone: its confirmation page is too.
    assert manager_client.get(delete_url(seeded.failed)).status_code == 404


def test_a_refused_delete_says_why_and_changes_nothing(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()  # the delayed job has a continuation waiting for it
    response = manager_client.post(delete_url(seeded.delayed), CONFIRMED, follow=True)
    assert "continuation(s) waiting for it" in response.content.decode()
    assert still_there(later_db, seeded.delayed, "delayed")


def test_a_running_job_has_no_delete_button(manager_client: Client, later_db: str) -> None:
    seeded = seed_jobs()
    record = record_of(later_db, seeded.queued[0])
    record.stage = "running"
    stores_for(later_db).kv.set(job_key("default", seeded.queued[0]), encode_record(record))
    html = manager_client.get(delete_url(seeded.queued[0])).content.decode()
    assert "cannot be deleted now" in html
    assert "Yes, delete it" not in html
    response = manager_client.post(delete_url(seeded.queued[0]), CONFIRMED, follow=True)
    assert "is running on a worker; wait until it finishes" in response.content.decode()
    assert still_there(later_db, seeded.queued[0], "running")


def test_the_delete_needs_the_manage_permission(viewer_client: Client, later_db: str) -> None:
    seeded = seed_jobs()
    assert viewer_client.get(delete_url(seeded.failed)).status_code == 403
    assert viewer_client.post(delete_url(seeded.failed), CONFIRMED).status_code == 403
    assert still_there(later_db, seeded.failed, "failed")
    # Nor does the job page offer it.
    html = viewer_client.get(reverse("later_django:job_detail", args=[seeded.failed]))
    assert delete_url(seeded.failed) not in html.content.decode()


def test_the_delete_needs_the_csrf_token(csrf_manager_client: Client, later_db: str) -> None:
    seeded = seed_jobs()
    refused = csrf_manager_client.post(delete_url(seeded.failed), CONFIRMED)
    assert refused.status_code == 403 and b"CSRF" in refused.content
    assert still_there(later_db, seeded.failed, "failed")
    token = str(csrf_manager_client.get(delete_url(seeded.failed)).context["csrf_token"])
    unconfirmed = csrf_manager_client.post(
        delete_url(seeded.failed), {"csrfmiddlewaretoken": token}
    )
    assert unconfirmed.status_code == 400
    assert still_there(later_db, seeded.failed, "failed")
    accepted = csrf_manager_client.post(
        delete_url(seeded.failed), {"csrfmiddlewaretoken": token, **CONFIRMED}
    )
    assert accepted.status_code == 302
    assert record_of(later_db, seeded.failed) is None


def test_anonymous_and_non_staff_users_are_sent_to_the_login_page(later_db: str) -> None:
    seeded = seed_jobs()
    visitor = Client()
    visitor.force_login(User.objects.create_user("visitor", password="x", is_staff=False))
    for client in (Client(), visitor):
        for response in (
            client.get(delete_url(seeded.failed)),
            client.post(delete_url(seeded.failed), CONFIRMED),
        ):
            assert response.status_code == 302
            assert reverse("admin:login") in response["Location"]
    assert still_there(later_db, seeded.failed, "failed")
