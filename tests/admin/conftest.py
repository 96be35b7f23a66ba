"""Fixtures of the dashboard tests: the engine on the case's database, and admin users."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.test import Client, override_settings

from later_django.engine import metrics
from later_django.models import JobIndexEntry

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.fixture
def later_db(db_alias: str) -> Iterator[str]:
    """The alias of this case, with later_django reading and writing there."""
    metrics.accumulator.take()
    with override_settings(LATER={"NAMESPACE": "default", "DATABASE": db_alias}):
        yield db_alias
    metrics.accumulator.take()


def _user(username: str, *, staff: bool, manage: bool) -> User:
    user = User.objects.create_user(username, password="secret", is_staff=staff)
    if manage:
        content_type = ContentType.objects.get_for_model(JobIndexEntry, for_concrete_model=True)
        permission, _ = Permission.objects.get_or_create(
            codename="manage_jobs",
            content_type=content_type,
            defaults={"name": "Can retry, delete and run jobs from the dashboard"},
        )
        user.user_permissions.add(permission)
    return User.objects.get(pk=user.pk)


@pytest.fixture
def manager_client(later_db: str) -> Client:
    """A staff user with ``later_django.manage_jobs`` (CSRF not enforced)."""
    client = Client()
    client.force_login(_user("manager", staff=True, manage=True))
    return client


@pytest.fixture
def viewer_client(later_db: str) -> Client:
    """A staff user without the manage permission."""
    client = Client()
    client.force_login(_user("viewer", staff=True, manage=False))
    return client


@pytest.fixture
def csrf_manager_client(later_db: str) -> Client:
    """A staff user with the permission, on a client that enforces CSRF checks."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user("csrf-manager", staff=True, manage=True))
    return client
