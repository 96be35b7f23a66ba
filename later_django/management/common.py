"""What later_django's management commands share: their ``--version`` text, their
default logging, and the missing-tables check they make at start."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import django
from django.conf import settings
from django.core.management.base import CommandError
from django.db import DatabaseError

from later_django import __version__
from later_django.compat.tasks import TASKS_LOGGER_NAME
from later_django.exceptions import TablesMissing
from later_django.storage.tables import missing_tables


def later_django_version() -> str:
    """What ``--version`` prints for later_django's commands (Django's own says only
    Django's version)."""
    return f"later_django {__version__} (Django {django.get_version()})"


def log_to_stderr_unless_configured() -> None:
    """Without a LOGGING configuration for it, the ``later_django`` logger writes
    INFO and above to stderr, and ``django.tasks`` its ERROR lines (a failed job,
    with its traceback); Django's per-task INFO lines stay silent. With ``DEBUG``
    Django's own console handler already shows ``django.tasks``."""
    logger = logging.getLogger("later_django")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    )
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    tasks_logger = logging.getLogger(TASKS_LOGGER_NAME)
    if not settings.LOGGING and not settings.DEBUG and not tasks_logger.handlers:
        failures = logging.StreamHandler()
        failures.setFormatter(handler.formatter)
        failures.setLevel(logging.ERROR)
        tasks_logger.addHandler(failures)


def refuse_missing_tables(using: str) -> None:
    """At a command's start: ``CommandError`` ("run manage.py migrate") when
    later_django's tables are absent from ``using``, instead of retrying "no such
    table" forever. A database that does not answer is left to the retries."""
    try:
        missing = missing_tables(using)
    except DatabaseError:
        return
    if missing:
        raise CommandError(str(TablesMissing(using, missing)))


def utc_time(epoch_ms: int | None) -> str:
    """``YYYY-MM-DD HH:MM:SS`` in UTC, or ``-`` for ``None``."""
    if epoch_ms is None:
        return "-"
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def age_seconds(age_ms: int | None) -> str:
    """An age in seconds with one decimal, or ``-`` for ``None``."""
    return "-" if age_ms is None else f"{age_ms / 1000:.1f}"


def text_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    """``rows`` under ``headers`` as lines of left-aligned columns two spaces apart."""
    cells = [headers, *[[str(value) for value in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return [
        "  ".join(value.ljust(widths[i]) for i, value in enumerate(row)).rstrip() for row in cells
    ]
