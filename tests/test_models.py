"""The models' managers are the way in to the storage on their database."""

from __future__ import annotations

import pytest

from later_django.models import DeliveryMessage, StorageValue
from later_django.storage.stores import stores_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_the_models_managers_lead_to_the_storage_on_their_database(db_alias: str) -> None:
    storage = stores_for(StorageValue.objects.db_manager(db_alias).write_alias()).kv
    storage.set("through-the-manager", b"v")
    assert StorageValue.objects.using(db_alias).get(key="through-the-manager").value == b"v"
    queue = stores_for(DeliveryMessage.objects.db_manager(db_alias).write_alias()).queue
    queue.publish("ns", "default", [b"m"])
    assert DeliveryMessage.objects.using(db_alias).filter(namespace="ns").count() == 1
    assert StorageValue.objects.write_alias() == "default"
