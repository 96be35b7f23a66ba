"""The in-process wake channel (``storage.local_wake``), what the MySQL/MariaDB driver
offers instead of notifications: a transaction that published rings this process's
subscriptions when it commits, once, and never when it rolls back."""

from __future__ import annotations

import pytest
from django.db import transaction

from later_django.storage.local_wake import ANY_NAMESPACE, LocalWakeChannel, ring_at_commit
from later_django.storage.stores import driver_for
from tests.conftest import use_database

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True


def test_a_commit_rings_every_subscription_once_and_a_rollback_none(db_alias: str) -> None:
    channel = LocalWakeChannel()
    with channel.subscribe() as first, channel.subscribe() as second:
        with transaction.atomic(using=db_alias):
            ring_at_commit(db_alias)
            ring_at_commit(db_alias)  # a second publish of the same transaction
            assert list(first.payloads(0.01)) == []  # not before the commit
        assert list(first.payloads(0.5)) == [ANY_NAMESPACE]
        assert list(second.payloads(0.5)) == [ANY_NAMESPACE]

        with pytest.raises(RuntimeError), transaction.atomic(using=db_alias):
            ring_at_commit(db_alias)
            raise RuntimeError("rolled back")
        assert list(first.payloads(0.05)) == []

    with channel.subscribe() as late:
        assert list(late.payloads(0.01)) == []  # nothing rung before it subscribed


def test_the_probe_reaches_the_subscriptions(db_alias: str) -> None:
    channel = LocalWakeChannel()
    with channel.subscribe() as subscription:
        channel.send_probe("probe:1")
        assert list(subscription.payloads(0.5)) == ["probe:1"]


def test_the_mysql_driver_wakes_its_own_process_and_sends_no_notification(
    request: pytest.FixtureRequest,
) -> None:
    mariadb = use_database(request, "mariadb")
    driver = driver_for(mariadb)
    channel = driver.wake_channel()
    assert driver.polls_for_work
    with channel.subscribe() as subscription:
        with transaction.atomic(using=mariadb):
            assert driver.wants_wake_notification() is False
        assert list(subscription.payloads(0.5)) == [ANY_NAMESPACE]
