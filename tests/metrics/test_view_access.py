"""Who may read the metrics view: staff (session) or the bearer token of
``LATER["METRICS"]["TOKEN"]``; anyone else is refused without a figure."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from later_django.core.metric_names import VIEW_METRICS
from tests.metrics.scrape import families_of

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

URL = "/later/metrics"
TOKEN = "t" * 12 + "0123456789ab"


@pytest.fixture
def later(db_alias: str):
    later = {"NAMESPACE": "default", "DATABASE": db_alias, "METRICS": {"TOKEN": TOKEN}}
    with override_settings(LATER=later):
        yield db_alias


def test_anonymous_gets_401_with_the_bearer_challenge_and_no_figure(later: str) -> None:
    response = Client().get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"later_" not in response.content


def test_a_signed_in_user_who_is_not_staff_gets_403(later: str) -> None:
    client = Client()
    client.force_login(User.objects.create_user("plain", password="x", is_staff=False))
    assert client.get(URL).status_code == 403


def test_a_wrong_token_gets_403(later: str) -> None:
    response = Client().get(URL, headers={"Authorization": "Bearer " + "x" * 24})
    assert response.status_code == 403
    assert b"later_" not in response.content


def test_staff_and_the_token_read_every_view_family(later: str) -> None:
    staff = Client()
    staff.force_login(User.objects.create_user("staff", password="x", is_staff=True))
    by_session = staff.get(URL)
    by_token = Client().get(URL, headers={"Authorization": f"Bearer {TOKEN}"})
    for response in (by_session, by_token):
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain; version=")
        assert response["Cache-Control"] == "no-store"
        assert families_of(response.content.decode()) == {m.name for m in VIEW_METRICS}


def test_no_token_configured_means_staff_only(db_alias: str) -> None:
    with override_settings(LATER={"NAMESPACE": "default", "DATABASE": db_alias}):
        response = Client().get(URL, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 401


def test_post_is_refused(later: str) -> None:
    response = Client().post(URL, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 405
