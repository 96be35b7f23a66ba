"""System checks name the bad LATER key and the rule it breaks."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from later_django.checks import check_later_settings, check_sqlite_options
from later_django.conf import later_settings


def ids_and_messages(messages: list) -> list[tuple[str, str]]:
    return [(message.id, message.msg) for message in messages]


def test_default_settings_pass_every_check() -> None:
    assert check_later_settings() == []
    assert check_sqlite_options() == []


@pytest.mark.parametrize(
    ("later", "check_id", "named"),
    [
        ("nope", "later_django.E001", "LATER must be a dict"),
        ({"NAMESPACE": ""}, "later_django.E002", "LATER['NAMESPACE']"),
        ({"NAMESPACE": "shop-eu"}, "later_django.E002", "'shop-eu'"),
        ({"NAMESPACE": "x" * 201}, "later_django.E002", "1 to 200"),
        ({"DATABASE": "missing"}, "later_django.E003", "'missing'"),
        ({"RETENTION": {"success": -1}}, "later_django.E004", "LATER['RETENTION']['success']"),
        ({"RETENTION": {"done": 5}}, "later_django.E004", "unknown key 'done'"),
        ({"VACUUM_INTERVAL": "daily"}, "later_django.E005", "LATER['VACUUM_INTERVAL']"),
        ({"WORKER_SYNCHRONOUS_COMMIT": "yes"}, "later_django.E007", "WORKER_SYNCHRONOUS_COMMIT"),
    ],
)
def test_an_invalid_setting_is_reported_with_its_id_and_key(later, check_id, named) -> None:
    with override_settings(LATER=later):
        found = ids_and_messages(check_later_settings())
        assert any(found_id == check_id and named in text for found_id, text in found), found
        with pytest.raises(ImproperlyConfigured) as raised:
            later_settings()
        assert named in str(raised.value)


def test_later_settings_fill_in_defaults() -> None:
    with override_settings(LATER={"RETENTION": {"success": 60}}):
        resolved = later_settings()
    assert resolved.namespace == "default"
    assert resolved.retention_seconds == {"success": 60, "failed": 7 * 86_400}
    assert resolved.vacuum_interval_seconds is None


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_sqlite_without_immediate_transactions_is_warned_about(settings) -> None:
    databases = {alias: dict(config) for alias, config in settings.DATABASES.items()}
    databases["default"]["OPTIONS"] = {"init_command": "PRAGMA journal_mode=WAL"}
    with override_settings(DATABASES=databases):
        found = ids_and_messages(check_sqlite_options())
    assert [check_id for check_id, _ in found] == ["later_django.W001"]
    assert "transaction_mode" in found[0][1]
