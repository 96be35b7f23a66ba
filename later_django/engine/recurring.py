"""Recurring definitions: stored by id, listed by a key range scan, parsed with croniter.

A definition lives in ``later_storage`` under ``<ns>-recurring-<id>`` as a
MessagePack map with short keys (``v`` is the format version). Ids are 1 to 200
letters, digits, ``_``, ``.``, ``:`` or ``-``. Every key that starts with
``<ns>-recurring-`` sorts before ``<ns>-recurring.`` (``-`` < ``.``), so that
range holds exactly the definitions of one namespace. Next to each definition,
the empty key ``<ns>-recurdue-<next run ms, 15 digits>-<id>`` indexes it by
next run; definition and index key are always written in one ``apply``.

Cron expressions are parsed by croniter: five fields (minute hour day month
weekday) or six with a trailing *seconds* field (``* * * * * */10``: every ten
seconds). Ticks are computed on timezone-aware datetimes in the definition's
time zone, so DST is croniter's (a 02:30 tick on a spring-forward day runs once,
at the first existing instant after it).

The pass that enqueues due occurrences is :mod:`later_django.engine.recurring_pass`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgpack
from croniter import croniter
from django.conf import settings as django_settings
from django.db import transaction

from later_django.core import clock
from later_django.core.keys import recurring_due_key, recurring_key, recurring_key_bounds
from later_django.core.payload import json_compatible
from later_django.exceptions import RecordDecodeError
from later_django.storage.ports.kv import KeyValuePort
from later_django.storage.stores import Stores
from later_django.storage.types import Delete, Set, StorageOperation

logger = logging.getLogger("later_django.recurring")

DEFINITION_FORMAT_VERSION = 1
RECURRING_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
#: Where a definition came from: ``LATER["RECURRING"]`` (synced at worker start,
#: deleted when removed from settings) or the API (left alone by the sync).
SOURCE_SETTINGS = "settings"
SOURCE_API = "api"
DEFAULT_TIMEZONE = "UTC"
#: Occurrence ids a definition remembers (``recent_job_ids``).
RECENT_RUNS = 5
_PAGE = 200


@dataclass
class RecurringDefinition:
    """One recurring job. Times are epoch ms; ``last_run_ms`` is the tick of the last
    occurrence enqueued (``None`` until the first one)."""

    id: str
    cron: str
    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    timezone: str
    sequential: bool
    next_run_ms: int
    last_run_ms: int | None = None
    #: ``SOURCE_SETTINGS`` or ``SOURCE_API``.
    source: str = SOURCE_API
    created_at_ms: int = 0
    updated_at_ms: int = 0
    #: the id of the last occurrence enqueued.
    last_job_id: str | None = None
    #: why the last due tick was skipped (e.g. the task path no longer resolves).
    last_error: str | None = None
    #: ``False``: disabled by an operator; no tick is due (its due key is absent) until
    #: it is enabled again, and the ticks it missed meanwhile are not caught up.
    enabled: bool = True
    #: the ids of the last occurrences enqueued (ticks and runs now), newest first, at
    #: most ``RECENT_RUNS``: what the recurring page shows with their outcomes.
    recent_job_ids: list[str] = field(default_factory=list)

    def with_runs(self, job_ids: list[str]) -> list[str]:
        """``recent_job_ids`` after the occurrences ``job_ids`` (oldest first) were
        enqueued: newest first, at most ``RECENT_RUNS``."""
        return [*reversed(job_ids), *self.recent_job_ids][:RECENT_RUNS]


def validate_recurring_id(recurring_id: Any) -> str:
    """Returns ``recurring_id`` or raises ``ValueError`` naming it and the rule."""
    if not isinstance(recurring_id, str) or not RECURRING_ID_PATTERN.fullmatch(recurring_id):
        raise ValueError(
            f"recurring id {recurring_id!r} must be 1 to 200 letters, digits, '_', '.', ':' or '-'"
        )
    return recurring_id


def validate_timezone(name: Any, recurring_id: str) -> str:
    """Returns the zoneinfo name (``None`` → ``"UTC"``) or raises ``ValueError``."""
    if name is None:
        return DEFAULT_TIMEZONE
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"timezone {name!r} of recurring job {recurring_id!r} must be an IANA time zone "
            f"name such as 'Europe/Paris'"
        )
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"timezone {name!r} of recurring job {recurring_id!r} is not a known IANA time "
            f"zone name (zoneinfo)"
        ) from None
    return name


def cron_problem(cron: Any) -> str | None:
    """Why ``cron`` is not a valid croniter expression, or ``None`` when it is."""
    if not isinstance(cron, str) or not cron.strip():
        return f"cron expression {cron!r} must be a non-empty string"
    if not croniter.is_valid(cron):
        return (
            f"cron expression {cron!r} is not valid (5 fields: minute hour day month "
            f"weekday, or 6 with a trailing seconds field)"
        )
    try:  # is_valid accepts expressions that never match (30 February, a past year)
        croniter(cron, datetime.now(UTC)).get_next(datetime)
    except Exception as error:  # croniter raises CroniterBadDateError and others
        return f"cron expression {cron!r} never matches a date from now on ({error})"
    return None


def validate_cron(cron: Any, recurring_id: str) -> str:
    """Returns ``cron`` or raises ``ValueError`` naming the expression and the id."""
    problem = cron_problem(cron)
    if problem is not None:
        raise ValueError(f"{problem}; recurring job {recurring_id!r}")
    return str(cron)


def _aware(epoch_ms: int, timezone: str) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=ZoneInfo(timezone))


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def next_tick_ms(cron: str, timezone: str, after_ms: int) -> int:
    """The first tick of ``cron`` strictly after ``after_ms``, in ``timezone``."""
    moment = croniter(cron, _aware(after_ms, timezone)).get_next(datetime)
    # croniter works in whole seconds: a start inside a second can give that
    # second back; step until the tick is strictly later.
    while _ms(moment) <= after_ms:
        moment = croniter(cron, moment).get_next(datetime)
    return _ms(moment)


def last_tick_ms(cron: str, timezone: str, at_or_before_ms: int) -> int:
    """The last tick of ``cron`` at or before ``at_or_before_ms``, in ``timezone``."""
    moment = croniter(cron, _aware(at_or_before_ms + 1, timezone)).get_prev(datetime)
    while _ms(moment) > at_or_before_ms:
        moment = croniter(cron, moment).get_prev(datetime)
    return _ms(moment)


_FIELDS = {
    "id": "id",
    "cron": "cron",
    "task": "task_path",
    "args": "args",
    "kwargs": "kwargs",
    "tz": "timezone",
    "seq": "sequential",
    "next": "next_run_ms",
    "last": "last_run_ms",
    "src": "source",
    "ct": "created_at_ms",
    "ut": "updated_at_ms",
    "lj": "last_job_id",
    "err": "last_error",
    "on": "enabled",
    "rj": "recent_job_ids",
}
_REQUIRED = ("id", "cron", "task", "args", "kwargs", "tz", "seq", "next")


def encode_definition(definition: RecurringDefinition) -> bytes:
    data: dict[str, Any] = {"v": DEFINITION_FORMAT_VERSION}
    for short, name in _FIELDS.items():
        data[short] = getattr(definition, name)
    packed: bytes = msgpack.packb(data, use_bin_type=True)
    return packed


def decode_definition(raw: bytes) -> RecurringDefinition:
    """Decodes a stored definition; raises ``RecordDecodeError`` when malformed."""
    try:
        data = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except Exception as error:
        raise RecordDecodeError(f"recurring definition is not valid MessagePack: {error}") from None
    if not isinstance(data, dict) or data.get("v") != DEFINITION_FORMAT_VERSION:
        raise RecordDecodeError(f"recurring definition has an unknown format: {data!r:.200}")
    missing = [short for short in _REQUIRED if short not in data]
    if missing:
        raise RecordDecodeError(f"recurring definition lacks the fields {missing}")
    values = {name: data[short] for short, name in _FIELDS.items() if short in data}
    return RecurringDefinition(**values)


def get_recurring(
    *, stores: Stores, namespace: str, recurring_id: str
) -> RecurringDefinition | None:
    """The definition stored under ``recurring_id``, or ``None``."""
    raw = stores.kv.get(recurring_key(namespace, recurring_id))
    return None if raw is None else decode_definition(raw)


def list_recurring(*, stores: Stores, namespace: str) -> list[RecurringDefinition]:
    """Every definition of ``namespace`` in id order (a key range scan plus one
    ``get_many`` per page). A definition that cannot be decoded is left out and logged."""
    kv = stores.kv
    start, stop = recurring_key_bounds(namespace)
    definitions: list[RecurringDefinition] = []
    page = _PAGE
    while True:
        keys = kv.key_scan(start, stop, page)
        if not keys:
            break
        values = kv.get_many(keys)
        for key in keys:
            raw = values.get(key)
            if raw is None:
                continue
            try:
                definitions.append(decode_definition(raw))
            except RecordDecodeError as error:
                logger.error("recurring definition %s cannot be decoded: %s", key, error)
        if len(keys) < page:
            break
        start = keys[-1] + "\x01"  # the next key in byte order (PostgreSQL text has no NUL)
    return definitions


# --- the schedule index: which definitions are due, read without scanning them all ---


def write_operations(
    namespace: str, old: RecurringDefinition | None, new: RecurringDefinition | None
) -> list[StorageOperation]:
    """The writes that turn stored ``old`` into ``new`` (``None``: absent), index included:
    an enabled definition has its due key, a disabled one none."""
    operations: list[StorageOperation] = []
    old_due, new_due = _due_ms(old), _due_ms(new)
    if old is not None and old_due is not None and old_due != new_due:
        operations.append(Delete(recurring_due_key(namespace, old_due, old.id)))
    if new is None:
        if old is not None:
            operations.append(Delete(recurring_key(namespace, old.id)))
        return operations
    operations.append(Set(recurring_key(namespace, new.id), encode_definition(new)))
    if new_due is not None:
        operations.append(Set(recurring_due_key(namespace, new_due, new.id), b""))
    return operations


def _due_ms(definition: RecurringDefinition | None) -> int | None:
    """The time of the definition's due key, or ``None`` when it has none."""
    if definition is None or not definition.enabled:
        return None
    return definition.next_run_ms


def _locked(kv: KeyValuePort, namespace: str, recurring_id: str) -> RecurringDefinition | None:
    """The stored definition, its row locked until the transaction ends (PostgreSQL;
    SQLite's IMMEDIATE transaction holds the write lock already)."""
    key = recurring_key(namespace, recurring_id)
    raw = kv.get_many_for_update([key]).get(key)
    return None if raw is None else decode_definition(raw)


# --- creating, replacing and removing definitions ---


def upsert_definition(
    *,
    stores: Stores,
    namespace: str,
    recurring_id: str,
    cron: str,
    task_path: str,
    args: list[Any],
    kwargs: dict[str, Any],
    timezone: str | None,
    sequential: bool,
    source: str,
    now: int | None = None,
) -> RecurringDefinition:
    """Creates or replaces the definition ``recurring_id`` in one transaction (the
    caller's, when inside ``atomic()``), validating id, cron and time zone first
    (``ValueError``, nothing written). When cron and time zone are unchanged the
    stored next and last runs are kept; otherwise the next run is the first tick
    after ``now`` in the time zone. An unchanged definition is not rewritten."""
    validate_recurring_id(recurring_id)
    validate_cron(cron, recurring_id)
    timezone = validate_timezone(timezone, recurring_id)
    now = clock.now_ms() if now is None else now
    with transaction.atomic(using=stores.using):
        old = _locked(stores.kv, namespace, recurring_id)
        same_schedule = old is not None and old.cron == cron and old.timezone == timezone
        kept = old if same_schedule else None
        new = RecurringDefinition(
            id=recurring_id,
            cron=cron,
            task_path=task_path,
            args=list(args),
            kwargs=dict(kwargs),
            timezone=timezone,
            sequential=bool(sequential),
            next_run_ms=kept.next_run_ms if kept else next_tick_ms(cron, timezone, now),
            last_run_ms=None if old is None else old.last_run_ms,
            source=source,
            created_at_ms=now if old is None else old.created_at_ms,
            updated_at_ms=now,
            last_job_id=None if old is None else old.last_job_id,
            last_error=kept.last_error if kept and kept.task_path == task_path else None,
            enabled=True if old is None else old.enabled,
            recent_job_ids=[] if old is None else list(old.recent_job_ids),
        )
        if old is not None and replace(old, updated_at_ms=now) == new:
            return old
        stores.kv.apply(write_operations(namespace, old, new), savepoint=False)
    return new


def set_enabled(
    *, stores: Stores, namespace: str, recurring_id: str, enabled: bool, now: int | None = None
) -> bool:
    """Enables or disables the definition in one transaction (the caller's inside
    ``atomic()``); ``True`` when that changed it, ``False`` when it already was so.
    Disabling removes its due key (no pass sees it); enabling sets the next run to the
    first tick after ``now``, so ticks missed while disabled are skipped, not caught
    up. ``LookupError`` naming the id when there is no such definition."""
    now = clock.now_ms() if now is None else now
    with transaction.atomic(using=stores.using):
        old = _locked(stores.kv, namespace, recurring_id)
        if old is None:
            raise LookupError(f"there is no recurring job {recurring_id!r}")
        if old.enabled == enabled:
            return False
        next_run = next_tick_ms(old.cron, old.timezone, now) if enabled else old.next_run_ms
        new = replace(old, enabled=enabled, next_run_ms=next_run, updated_at_ms=now)
        stores.kv.apply(write_operations(namespace, old, new), savepoint=False)
    return True


def delete_definition(
    *, stores: Stores, namespace: str, recurring_id: str, only_source: str | None = None
) -> bool:
    """Deletes the definition (and its index key); ``True`` if one was deleted. With
    ``only_source`` a definition from another source is left alone."""
    with transaction.atomic(using=stores.using):
        old = _locked(stores.kv, namespace, recurring_id)
        if old is None or (only_source is not None and old.source != only_source):
            return False
        stores.kv.apply(write_operations(namespace, old, None), savepoint=False)
    return True


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
