"""``LATER["RECURRING"]``: its entries checked (check later_django.E009) and synced
into the stored definitions at worker start (source ``settings``).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.conf import settings as django_settings

from later_django.core.payload import json_compatible
from later_django.engine.recurring import (
    SOURCE_SETTINGS,
    delete_definition,
    get_recurring,
    list_recurring,
    upsert_definition,
    validate_recurring_id,
)
from later_django.engine.recurring_schedule import cron_problem, validate_timezone
from later_django.storage.stores import Stores

logger = logging.getLogger("later_django.recurring")


def configured_recurring() -> dict[str, dict[str, Any]]:
    """``LATER["RECURRING"]`` (validated by check later_django.E009), or ``{}``."""
    later = getattr(django_settings, "LATER", None) or {}
    return dict(later.get("RECURRING") or {})


def sync_configured_recurring(
    *, stores: Stores, namespace: str, configured: dict[str, dict[str, Any]] | None = None
) -> dict[str, int]:
    """Makes the stored settings definitions match ``LATER["RECURRING"]`` (worker start).

    Each configured id is created or updated (source ``settings``; next run kept
    when cron and time zone did not change); a stored definition whose source is
    ``settings`` and whose id is no longer configured is deleted. Definitions made
    through the API are left alone, except that a configured id takes over an API
    definition of the same id. Returns counts: ``written``, ``unchanged``, ``deleted``.
    Safe when several workers start at once (each definition is written under its lock).
    """
    configured = configured_recurring() if configured is None else configured
    problems = recurring_problems(configured)
    if problems:
        raise ValueError("; ".join(problems))
    counts = {"written": 0, "unchanged": 0, "deleted": 0}
    for recurring_id, entry in configured.items():
        before = get_recurring(stores=stores, namespace=namespace, recurring_id=recurring_id)
        after = upsert_definition(
            stores=stores,
            namespace=namespace,
            recurring_id=recurring_id,
            cron=entry["cron"],
            task_path=entry["task"],
            args=list(entry.get("args", [])),
            kwargs=dict(entry.get("kwargs", {})),
            timezone=entry.get("timezone"),
            sequential=entry.get("sequential", False),
            source=SOURCE_SETTINGS,
        )
        counts["unchanged" if after == before else "written"] += 1
    for definition in list_recurring(stores=stores, namespace=namespace):
        stale = definition.source == SOURCE_SETTINGS and definition.id not in configured
        if stale and delete_definition(
            stores=stores,
            namespace=namespace,
            recurring_id=definition.id,
            only_source=SOURCE_SETTINGS,
        ):
            counts["deleted"] += 1
    if any(counts[name] for name in ("written", "deleted")):
        logger.info("recurring definitions from LATER['RECURRING'] synced: %s", counts)
    return counts


_ENTRY_KEYS = {"cron", "task", "args", "kwargs", "sequential", "timezone"}
_TASK_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def recurring_problems(raw: Any) -> list[str]:
    """Messages for every invalid entry of ``LATER["RECURRING"]`` (check later_django.E009).

    The task path is checked for its shape only: importing it here would import
    the project's task modules while Django runs its checks. A path that does not
    lead to a task is reported by the scheduling pass (logged, tick skipped)."""
    if not isinstance(raw, dict):
        return [f"LATER['RECURRING'] must be a dict of recurring id to options, got {raw!r}."]
    problems: list[str] = []
    for recurring_id, entry in raw.items():
        where = f"LATER['RECURRING'][{recurring_id!r}]"
        try:
            validate_recurring_id(recurring_id)
        except ValueError as error:
            problems.append(f"LATER['RECURRING'] key: {error}.")
            continue
        if not isinstance(entry, dict):
            problems.append(f"{where} must be a dict with 'cron' and 'task', got {entry!r}.")
            continue
        if unknown := sorted(set(entry) - _ENTRY_KEYS, key=str):
            problems.append(f"{where} has unknown keys {unknown}; allowed: {sorted(_ENTRY_KEYS)}.")
        problem = cron_problem(entry.get("cron"))
        if problem is not None:
            problems.append(f"{where}['cron']: {problem}.")
        task_path = entry.get("task")
        if not isinstance(task_path, str) or not _TASK_PATH.fullmatch(task_path):
            problems.append(
                f"{where}['task'] must be the dotted path of a task (e.g. "
                f"'shop.tasks.nightly_report'), got {task_path!r}."
            )
        args, kwargs = entry.get("args", []), entry.get("kwargs", {})
        if not isinstance(args, list | tuple):
            problems.append(f"{where}['args'] must be a list, got {args!r}.")
        elif not isinstance(kwargs, dict):
            problems.append(f"{where}['kwargs'] must be a dict, got {kwargs!r}.")
        else:
            try:
                json_compatible(list(args), f"{where}['args']")
                json_compatible(dict(kwargs), f"{where}['kwargs']")
            except TypeError as error:
                problems.append(f"{error}.")
        if not isinstance(entry.get("sequential", False), bool):
            problems.append(f"{where}['sequential'] must be True or False.")
        try:
            validate_timezone(entry.get("timezone"), recurring_id)
        except ValueError as error:
            problems.append(f"{where}['timezone']: {error}.")
    return problems
