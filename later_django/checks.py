"""System checks (``manage.py check``): ids ``later_django.E0xx`` and ``W0xx``.

The ``LATER`` rules are conf's (:func:`later_django.conf.setting_problems`)
plus those whose validation lives in the engine, added to them here at import
(the app's ``ready``), so that :func:`later_django.conf.later_settings` refuses
them too while conf itself never imports the engine.
"""

from __future__ import annotations

import sys
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from later_django.compat import SHIM_NAME, itercompat
from later_django.conf import add_setting_rule, later_settings, setting_problems
from later_django.engine.recurring_settings import recurring_problems
from later_django.engine.task_policy import policy_key_problems, unmatched_policy_keys


def recurring_setting_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """Check later_django.E009: every invalid entry of ``LATER["RECURRING"]`` (id, cron,
    task path shape, args/kwargs, sequential, time zone)."""
    return [
        ("later_django.E009", message) for message in recurring_problems(raw.get("RECURRING", {}))
    ]


add_setting_rule(recurring_setting_problems)


@checks.register()
def check_later_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Reports every invalid ``LATER`` value, naming the key and the rule."""
    raw = getattr(settings, "LATER", {}) or {}
    return [checks.Error(message, id=check_id) for check_id, message in setting_problems(raw)]


@checks.register()
def check_task_policies(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``LATER["TASK_POLICIES"]`` against the code: E019 for a unique key function that
    cannot be imported or is not callable; W003 for an exact key that names no task
    (its path is imported to find out) or a pattern that matches none of the tasks
    imported after each installed app's ``tasks`` module (a task module imported by
    nothing is unknown here, though the policy still applies to its jobs by path).
    Silent while ``LATER`` itself is invalid (:func:`check_later_settings` says why)."""
    try:
        policies = later_settings().task_policies
    except ImproperlyConfigured:
        return []
    if not policies.keys():
        return []
    errors = [
        checks.Error(f"{problem}.", id="later_django.E019")
        for problem in policy_key_problems(policies)
    ]
    warnings = [
        checks.Warning(
            f"{message}.",
            hint="Correct the path or pattern, or remove the entry.",
            id="later_django.W003",
        )
        for message in unmatched_policy_keys(policies)
    ]
    return [*errors, *warnings]


def _later_database() -> tuple[str, dict[str, Any]]:
    """The alias ``LATER["DATABASE"]`` names (``default`` when unset or unreadable: the
    settings' own check reports that) and its ``DATABASES`` entry (empty if absent)."""
    raw = getattr(settings, "LATER", {}) or {}
    alias = raw.get("DATABASE", "default") if isinstance(raw, dict) else "default"
    return alias, settings.DATABASES.get(alias, {})


# Not tagged ``database``: Django runs those only with ``check --database``, and this
# one reads the settings alone.
@checks.register()
def check_sqlite_options(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warns when a SQLite database used by later_django is not set up for concurrent writers.

    Several worker processes share one SQLite file only when transactions take
    the write lock at ``BEGIN`` (``transaction_mode="IMMEDIATE"``); otherwise a
    read that turns into a write can fail at once with "database is locked".
    """
    messages: list[checks.CheckMessage] = []
    alias, database = _later_database()
    if database.get("ENGINE") == "django.db.backends.sqlite3":
        mode = (database.get("OPTIONS", {}).get("transaction_mode") or "").upper()
        if mode != "IMMEDIATE":
            messages.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] is SQLite without OPTIONS['transaction_mode'] = "
                    f"'IMMEDIATE' (it is {mode or 'unset'!r}); concurrent workers will see "
                    "'database is locked' errors.",
                    hint="Set OPTIONS = {'transaction_mode': 'IMMEDIATE', "
                    "'init_command': 'PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL'}.",
                    id="later_django.W001",
                )
            )
    return messages


#: The one isolation level later_django's MariaDB/MySQL statements are written for.
MYSQL_ISOLATION = "read committed"


# Untagged, as W001: it reads the settings alone.
@checks.register()
def check_mysql_isolation(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E022: the MariaDB/MySQL database later_django uses runs at READ COMMITTED.

    Under REPEATABLE READ (the server's default) a claim's ``FOR UPDATE`` takes gap
    locks, and a publish into the locked range waits for the whole lock-wait timeout
    (issue 36's trial: seconds, against 0.2 ms under READ COMMITTED). Django sets
    READ COMMITTED itself unless ``OPTIONS["isolation_level"]`` names another level
    or is empty (then the server's default applies)."""
    alias, database = _later_database()
    if "mysql" not in str(database.get("ENGINE", "")):
        return []
    level = (database.get("OPTIONS") or {}).get("isolation_level", MYSQL_ISOLATION)
    if isinstance(level, str) and level.lower() == MYSQL_ISOLATION:
        return []
    return [
        checks.Error(
            f"DATABASES[{alias!r}] is MariaDB/MySQL with OPTIONS['isolation_level'] = "
            f"{level!r}; later_django needs {MYSQL_ISOLATION!r} (under the server's "
            "REPEATABLE READ a claim's gap locks hold up every enqueue).",
            hint=f"Set OPTIONS['isolation_level'] = {MYSQL_ISOLATION!r} (Django's default "
            "when the key is absent).",
            id="later_django.E022",
        )
    ]


#: The oldest servers whose indexes keep ``DESC`` (MariaDB 10.8, MDEV-13756; MySQL 8.0):
#: the claim walks ``(namespace, queue_name, priority DESC, sequence)`` in order. On an
#: older server the index is built ascending, the claim sorts its candidates, and a
#: sorting ``FOR UPDATE`` locks every candidate it read (issue 36).
MYSQL_FLOOR = {"mariadb": (10, 8), "mysql": (8, 0)}


@checks.register(checks.Tags.database)
def check_mysql_version(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E024: the MariaDB/MySQL server later_django uses keeps descending indexes.

    Tagged ``database`` (it asks the server its version): Django runs it before
    ``migrate`` and with ``check --database``."""
    alias, database = _later_database()
    if "mysql" not in str(database.get("ENGINE", "")) or alias not in (databases or ()):
        return []
    from django.db import connections

    connection = connections[alias]
    kind = "mariadb" if connection.mysql_is_mariadb else "mysql"
    version = tuple(connection.mysql_version[:2])
    floor = MYSQL_FLOOR[kind]
    if version >= floor:
        return []
    name = "MariaDB" if kind == "mariadb" else "MySQL"
    return [
        checks.Error(
            f"DATABASES[{alias!r}] is {name} {'.'.join(map(str, version))}; later_django "
            f"needs {name} {'.'.join(map(str, floor))} or later, whose indexes keep DESC "
            "(an older server sorts every claim's candidates and locks them all).",
            hint=f"Upgrade the server to {name} {'.'.join(map(str, floor))}+ "
            "(MariaDB 10.11 LTS is what later_django's CI runs).",
            id="later_django.E024",
        )
    ]


@checks.register()
def check_admin_tools_order(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E012 (W002 where Django still ships ``django.utils.itercompat``): an
    ``admin_tools`` app listed before ``later_django`` in ``INSTALLED_APPS``.

    ``admin_tools.dashboard`` imports ``django.utils.itercompat`` (removed in
    Django 6.0) while Django loads the apps in order; the shim later_django installs
    is only there when ``later_django`` comes first. In a fresh process that order
    fails before any check runs; this check catches it wherever the process got
    through (the shim installed earlier, or a Django that still has the module).
    """
    names = [config.name for config in apps.get_app_configs()]
    if "later_django" not in names:
        return []
    before = [name for name in names[: names.index("later_django")] if _is_admin_tools(name)]
    if not before:
        return []
    shimmed = sys.modules.get(SHIM_NAME) is itercompat
    kind, check_id = (checks.Error, "E012") if shimmed else (checks.Warning, "W002")
    return [
        kind(
            f"INSTALLED_APPS lists {', '.join(map(repr, before))} before 'later_django'; "
            f"list 'later_django' first: admin_tools.dashboard imports {SHIM_NAME} "
            "(removed in Django 6.0), which later_django provides only when Django loads "
            "it before the admin_tools apps.",
            hint="Move 'later_django' above the admin_tools apps in INSTALLED_APPS.",
            id=f"later_django.{check_id}",
        )
    ]


def _is_admin_tools(app_name: str) -> bool:
    return app_name == "admin_tools" or app_name.startswith("admin_tools.")
