"""The models' managers are the way in to the storage on their database."""

from __future__ import annotations

import pytest

from later_django.models import DeliveryMessage, StorageValue

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_the_models_managers_lead_to_the_storage_on_their_database(db_alias: str) -> None:
    storage = StorageValue.objects.db_manager(db_alias).storage()
    storage.set("through-the-manager", b"v")
    assert StorageValue.objects.using(db_alias).get(key="through-the-manager").value == b"v"
    queue = DeliveryMessage.objects.db_manager(db_alias).delivery_queue()
    queue.publish("ns", "default", [b"m"])
    assert DeliveryMessage.objects.using(db_alias).filter(namespace="ns").count() == 1
    assert StorageValue.objects.storage().using == "default"
