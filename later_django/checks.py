"""System checks (``manage.py check``): ids ``later_django.E0xx`` and ``W0xx``.

The ``LATER`` rules are conf's (:func:`later_django.conf.setting_problems`)
plus those whose validation lives in the engine, added to them here at import
(the app's ``ready``), so that :func:`later_django.conf.later_settings` refuses
them too while conf itself never imports the engine.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from later_django.conf import add_setting_rule, setting_problems
from later_django.engine.recurring import recurring_problems


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


@checks.register(checks.Tags.database)
def check_sqlite_options(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warns when a SQLite database used by later_django is not set up for concurrent writers.

    Several worker processes share one SQLite file only when transactions take
    the write lock at ``BEGIN`` (``transaction_mode="IMMEDIATE"``); otherwise a
    read that turns into a write can fail at once with "database is locked".
    """
    messages: list[checks.CheckMessage] = []
    raw = getattr(settings, "LATER", {}) or {}
    alias = raw.get("DATABASE", "default") if isinstance(raw, dict) else "default"
    database = settings.DATABASES.get(alias, {})
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
