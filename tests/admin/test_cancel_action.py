"""The Cancel button: a confirmation page (GET) and the cancel (POST), both needing
the manage permission, the POST a CSRF token; saying what it did."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from later_django.compat.tasks import TaskResultStatus
from tests.admin.support import seed_jobs
from tests.admin.test_actions import record_of
from tests.engine.support import result

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_cancel_asks_for_confirmation_then_cancels(manager_client: Client, later_db: str) -> None:
    seeded = seed_jobs()
    detail = manager_client.get(reverse("later_django:job_detail", args=[seeded.delayed]))
    cancel_url = reverse("later_django:job_cancel", args=[seeded.delayed])
    assert cancel_url.encode() in detail.content
    page = manager_client.get(cancel_url)
    assert page.status_code == 200
    assert b"Yes, cancel it" in page.content
    assert record_of(later_db, seeded.delayed).stage == "delayed"  # a GET changes nothing
    response = manager_client.post(cancel_url, follow=True)
    assert record_of(later_db, seeded.delayed).stage == "cancelled"
    assert b"was cancelled; it will not run" in response.content
    # Its continuation (on success) failed with it.
    child = result(seeded.waiting_child)
    assert child.status == TaskResultStatus.FAILED
    assert child.errors[-1].traceback == f"parent {seeded.delayed} cancelled"


def test_a_finished_job_has_no_cancel_button_and_a_cancel_changes_nothing(
    manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    done = seeded.succeeded[0]
    detail = manager_client.get(reverse("later_django:job_detail", args=[done]))
    assert reverse("later_django:job_cancel", args=[done]).encode() not in detail.content
    response = manager_client.post(reverse("later_django:job_cancel", args=[done]), follow=True)
    assert b"had already finished; nothing changed" in response.content
    assert record_of(later_db, done).stage == "success"


def test_cancel_needs_the_permission_and_a_csrf_token(
    viewer_client: Client, csrf_manager_client: Client, later_db: str
) -> None:
    seeded = seed_jobs()
    url = reverse("later_django:job_cancel", args=[seeded.delayed])
    assert viewer_client.get(url).status_code == 403
    assert viewer_client.post(url).status_code == 403
    refused = csrf_manager_client.post(url)
    assert refused.status_code == 403 and b"CSRF" in refused.content
    assert record_of(later_db, seeded.delayed).stage == "delayed"
    token = csrf_manager_client.get(url).context["csrf_token"]
    accepted = csrf_manager_client.post(url, {"csrfmiddlewaretoken": str(token)})
    assert accepted.status_code == 302
    assert record_of(later_db, seeded.delayed).stage == "cancelled"
