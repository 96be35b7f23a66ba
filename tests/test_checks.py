"""System checks name the bad LATER key and the rule it breaks."""

from __future__ import annotations

from io import StringIO

import django
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from later_django.checks import (
    check_admin_tools_order,
    check_later_settings,
    check_mysql_isolation,
    check_sqlite_options,
)
from later_django.conf import KNOWN_KEYS, later_settings


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
        (
            {"WORKER_PREPARED_STATEMENTS": 1},
            "later_django.E017",
            "LATER['WORKER_PREPARED_STATEMENTS'] must be True or False, got 1",
        ),
        ({"TIMEOUT": 0}, "later_django.E013", "LATER['TIMEOUT'] must be None or a positive"),
        ({"TIMEOUT": "30s"}, "later_django.E013", "got '30s'"),
        ({"QUEUE_LIMITS": {"emails": {"rate": "fast"}}}, "later_django.E014", "'fast'"),
        ({"METRICS": {"TOKEN": "short"}}, "later_django.E015", "at least 24 characters"),
        ({"METRICS": {"NAMESPACES": ["a-b"]}}, "later_django.E015", "'a-b'"),
        ({"TRACING": "off"}, "later_django.E016", "LATER['TRACING'] must be True or False"),
        ({"TASK_POLICIES": {"a.b": {"timeout": "1m"}}}, "later_django.E019", "['timeout']"),
        ({"RESULT_MAX_BYTES": 0}, "later_django.E021", "LATER['RESULT_MAX_BYTES'] must be"),
        ({"RESULT_MAX_BYTES": "1MB"}, "later_django.E021", "got '1MB'"),
        ({"RESULT_MAX_BYTES": True}, "later_django.E021", "got True"),
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
    assert resolved.retention_seconds == {
        "success": 60,
        "failed": 7 * 86_400,
        "cancelled": 7 * 86_400,
    }
    assert resolved.vacuum_interval_seconds is None


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_sqlite_without_immediate_transactions_is_warned_about(settings) -> None:
    databases = {alias: dict(config) for alias, config in settings.DATABASES.items()}
    databases["default"]["OPTIONS"] = {"init_command": "PRAGMA journal_mode=WAL"}
    with override_settings(DATABASES=databases):
        found = ids_and_messages(check_sqlite_options())
    assert [check_id for check_id, _ in found] == ["later_django.W001"]
    assert "transaction_mode" in found[0][1]


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ({}, False),  # Django's default for MySQL is READ COMMITTED
        ({"isolation_level": "read committed"}, False),
        ({"isolation_level": "READ COMMITTED"}, False),
        ({"isolation_level": "repeatable read"}, True),
        ({"isolation_level": None}, True),  # no SET: the server's REPEATABLE READ
        ({"isolation_level": "serializable"}, True),
    ],
)
def test_mariadb_must_run_at_read_committed(settings, options: dict, refused: bool) -> None:
    """E022 names the alias, the value found and the setting to write."""
    databases = {alias: dict(config) for alias, config in settings.DATABASES.items()}
    databases["shop"] = {"ENGINE": "django.db.backends.mysql", "NAME": "shop", "OPTIONS": options}
    with override_settings(DATABASES=databases, LATER={"DATABASE": "shop"}):
        found = ids_and_messages(check_mysql_isolation())
    assert [check_id for check_id, _ in found] == (["later_django.E022"] if refused else [])
    if refused:
        message = found[0][1]
        assert "DATABASES['shop']" in message and repr(options["isolation_level"]) in message
        assert "'read committed'" in message


def test_the_isolation_check_leaves_other_databases_alone(settings) -> None:
    assert check_mysql_isolation() == []


def test_a_misspelled_top_level_key_is_an_error_naming_it_and_the_known_keys(
    db_alias: str,
) -> None:
    with override_settings(LATER={"NAMSPACE": "shop", "DATABASE": db_alias}):
        found = ids_and_messages(check_later_settings())
        assert [check_id for check_id, _ in found] == ["later_django.E011"]
        message = found[0][1]
        assert "'NAMSPACE'" in message and "did you mean 'NAMESPACE'?" in message
        assert all(key in message for key in KNOWN_KEYS)
        with pytest.raises(ImproperlyConfigured, match="unknown key 'NAMSPACE'"):
            later_settings()


def test_every_known_key_is_accepted(db_alias: str) -> None:
    later = {
        "NAMESPACE": "shop",
        "DATABASE": db_alias,
        "RETENTION": {"success": 60},
        "VACUUM_INTERVAL": None,
        "RETRY": {"max_retries": 1},
        "WORKER_SYNCHRONOUS_COMMIT": True,
        "WORKER_PREPARED_STATEMENTS": False,
        "WORKER_POLL_INTERVAL": 0.2,
        "TOPICS": {"orders": {"partitions": 2}},
        "MAINTENANCE_MODULES": [],
        "RECURRING": {},
        "TIMEOUT": 30,
        "QUEUE_LIMITS": {"emails": {"concurrency": 2, "rate": "10/1s"}},
        "METRICS": {"TOKEN": "x" * 24, "NAMESPACES": ["shop"]},
        "TRACING": False,
        "TASK_POLICIES": {"shop.tasks.*": {"queue": "shop", "concurrency": 1}},
        "RESULT_MAX_BYTES": 10_000,
    }
    assert sorted(later) == sorted(KNOWN_KEYS)
    with override_settings(LATER=later):
        assert check_later_settings() == []


def plain_check_output() -> str:
    """What ``manage.py check`` (no ``--database``) prints: it raises only on errors."""
    out, err = StringIO(), StringIO()
    call_command("check", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_plain_manage_py_check_shows_w001_for_the_sqlite_database_later_uses(
    settings, db_alias: str
) -> None:
    databases = {alias: dict(config) for alias, config in settings.DATABASES.items()}
    databases["default"]["OPTIONS"] = {"init_command": "PRAGMA journal_mode=WAL"}
    with override_settings(DATABASES=databases, LATER={"DATABASE": db_alias}):
        output = plain_check_output()
    # W001 is about the database LATER uses: SQLite without IMMEDIATE, never PostgreSQL.
    assert ("later_django.W001" in output) is (db_alias == "default"), output


ADMIN_TOOLS_APPS = ["admin_tools", "admin_tools.theming", "admin_tools.menu"]


def test_admin_tools_listed_before_later_django_is_an_error_saying_to_reorder(
    settings, db_alias: str
) -> None:
    """The shim is installed in this process already, so Django gets through the
    misordered list and the check can say what a fresh process cannot."""
    others = [app for app in settings.INSTALLED_APPS if app != "later_django"]
    misordered = [*others[:4], "later_django", *others[4:]]
    assert misordered[:4] == [*ADMIN_TOOLS_APPS, "admin_tools.dashboard"]
    with override_settings(INSTALLED_APPS=misordered, LATER={"DATABASE": db_alias}):
        found = ids_and_messages(check_admin_tools_order())
    # Django 5.2 still ships the module: the order works there, and is a warning.
    expected = "later_django.E012" if django.VERSION >= (6, 0) else "later_django.W002"
    assert [check_id for check_id, _ in found] == [expected]
    assert "'admin_tools.dashboard' before 'later_django'" in found[0][1]
    assert "list 'later_django' first" in found[0][1]
    assert check_admin_tools_order() == []  # the suite's own order: later_django first


def test_the_backend_without_later_django_installed_is_an_error_naming_the_fix(
    settings,
) -> None:
    """django.tasks runs each configured backend's ``check()``; the app's own checks are
    never registered when the app is not installed, so the backend reports it."""
    from later_django.compat.tasks import task_backends

    without = [app for app in settings.INSTALLED_APPS if app != "later_django"]
    with override_settings(INSTALLED_APPS=without):
        with pytest.raises(SystemCheckError) as raised:
            plain_check_output()
        [problem] = [m for m in task_backends["default"].check() if m.id == "later_django.E018"]
    output = str(raised.value)
    assert "later_django.E018" in output
    assert "'later_django' is not in INSTALLED_APPS" in output
    assert "TASKS['default'] uses later_django.backend.LaterBackend" in problem.msg
    assert problem.hint == "Add 'later_django' to INSTALLED_APPS, then run manage.py migrate."
    assert task_backends["default"].check() == []  # installed again: nothing to say


@pytest.mark.parametrize("value", [0, 0.0005, 61, -1, True, "0.1", float("nan"), None])
def test_a_poll_interval_outside_its_range_is_e023(value: object) -> None:
    with override_settings(LATER={"WORKER_POLL_INTERVAL": value}):
        found = ids_and_messages(check_later_settings())
        assert [check_id for check_id, _ in found] == ["later_django.E023"]
        assert "WORKER_POLL_INTERVAL" in found[0][1] and repr(value) in found[0][1]


def test_the_poll_interval_is_read_in_seconds() -> None:
    with override_settings(LATER={"WORKER_POLL_INTERVAL": 1}):
        assert later_settings().worker_poll_interval == 1.0
    with override_settings(LATER={}):
        assert later_settings().worker_poll_interval == 0.05


#: Keeps the ``mariadb`` alias in "__all__" for the version check's tests.
USES_MARIADB = True


@pytest.mark.django_db(databases="__all__")
def test_the_mariadb_server_here_keeps_descending_indexes(request) -> None:
    from later_django.checks import check_mysql_version
    from tests.conftest import use_database

    mariadb = use_database(request, "mariadb")
    with override_settings(LATER={"DATABASE": mariadb}):
        assert check_mysql_version(databases=[mariadb]) == []
        assert check_mysql_version(databases=["default"]) == []  # not asked: no look


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize(
    ("server", "refused"), [((10, 6, 21), True), ((10, 7, 8), True), ((10, 8, 0), False)]
)
def test_a_mariadb_older_than_10_8_is_refused(request, server: tuple, refused: bool) -> None:
    """The server's version as Django caches it on the connection, set to an older
    release's (no 10.6 server runs here): E024 names the version and the floor."""
    from django.db import connections

    from later_django.checks import check_mysql_version
    from tests.conftest import use_database

    mariadb = use_database(request, "mariadb")
    connection = connections[mariadb]
    connection.ensure_connection()
    real = connection.__dict__.get("mysql_version")
    connection.__dict__["mysql_version"] = server
    try:
        with override_settings(LATER={"DATABASE": mariadb}):
            found = ids_and_messages(check_mysql_version(databases=[mariadb]))
    finally:
        connection.__dict__.pop("mysql_version")
        if real is not None:
            connection.__dict__["mysql_version"] = real
    assert [check_id for check_id, _ in found] == (["later_django.E024"] if refused else [])
    if refused:
        assert f"MariaDB {server[0]}.{server[1]};" in found[0][1] and "10.8" in found[0][1]
