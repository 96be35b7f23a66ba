"""Topic layout: key routing, configuration checks, and the fixed partition count."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import override_settings

from later_django.conf import later_settings, setting_problems
from later_django.core.topics import RECURRING_TOPIC, partition_for_key
from later_django.engine.topics import (
    TopicLayoutMismatch,
    TopicNotConfigured,
    register_topic,
    stored_partitions,
    topic_partitions,
)
from later_django.storage.stores import stores_for


def test_a_key_always_routes_to_the_same_partition_within_range() -> None:
    assert partition_for_key("customer-42", 8) == partition_for_key("customer-42", 8)
    assert partition_for_key(42, 8) == partition_for_key("42", 8)
    spread = {partition_for_key(f"key-{n}", 8) for n in range(200)}
    assert spread == set(range(8))


def test_a_key_of_another_type_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"partition key must be str, bytes or int, got 1\.5"):
        partition_for_key(1.5, 8)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("topics", "fragment"),
    [
        ([], "must be a dict"),
        ({"orders": {"partitions": 0}}, "integer from 1 to 4096"),
        ({"orders": {"partitions": True}}, "integer from 1 to 4096"),
        ({"orders": 8}, "must be a dict with 'partitions'"),
        ({"bad name": {"partitions": 2}}, "letters, digits"),
        ({"__later_mine": {"partitions": 2}}, "reserved"),
        ({"orders": {"partitions": 2, "colour": "red"}}, "unknown option"),
    ],
)
def test_invalid_topics_are_reported_as_e008(topics: object, fragment: str) -> None:
    problems = setting_problems({"TOPICS": topics})
    assert [check_id for check_id, _ in problems] == ["later_django.E008"]
    assert fragment in problems[0][1]


def test_unconfigured_topic_raises_naming_it() -> None:
    with override_settings(LATER={"TOPICS": {"orders": {"partitions": 4}}}):
        settings = later_settings()
        assert topic_partitions(settings, "orders") == 4
        assert topic_partitions(settings, RECURRING_TOPIC) == 16
        with pytest.raises(TopicNotConfigured, match=r"topic 'invoices' is not configured"):
            topic_partitions(settings, "invoices")


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_a_topic_registered_with_another_partition_count_is_refused(db_alias: str) -> None:
    register_topic(stores_for(db_alias), "ns_topics", "orders", 8)
    register_topic(stores_for(db_alias), "ns_topics", "orders", 8)  # same layout: fine
    with pytest.raises(TopicLayoutMismatch, match=r"has 8 partitions in the database but 4"):
        register_topic(stores_for(db_alias), "ns_topics", "orders", 4)
    assert stored_partitions(stores_for(db_alias), "ns_topics", "orders") == 8
    register_topic(stores_for(db_alias), "ns_other", "orders", 4)  # namespaces are separate
    assert stored_partitions(stores_for(db_alias), "ns_other", "orders") == 4


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_the_store_records_a_topic_once_and_returns_the_recorded_count(db_alias: str) -> None:
    store = stores_for(db_alias).topics
    assert store.stored_partitions("ns_store", "orders") is None
    assert store.record_if_absent("ns_store", "orders", 8) == 8
    with transaction.atomic(using=db_alias):
        # A second registration with another count changes nothing and does not
        # break the caller's transaction.
        assert store.record_if_absent("ns_store", "orders", 4) == 8
        assert store.stored_partitions("ns_store", "orders") == 8
