"""Recurring definitions: stored by id, listed by a key range scan, created,
replaced, enabled, disabled and deleted.

A definition lives in ``later_storage`` under ``<ns>-recurring-<id>`` as a
MessagePack map with short keys (``v`` is the format version). Ids are 1 to 200
letters, digits, ``_``, ``.``, ``:`` or ``-``. Every key that starts with
``<ns>-recurring-`` sorts before ``<ns>-recurring.`` (``-`` < ``.``), so that
range holds exactly the definitions of one namespace. Next to each definition,
the empty key ``<ns>-recurdue-<next run ms, 15 digits>-<id>`` indexes it by
next run; definition and index key are always written in one ``apply``.

The schedule arithmetic (cron, time zones, ticks) is
:mod:`later_django.engine.recurring_schedule`; ``LATER["RECURRING"]`` is checked and
synced by :mod:`later_django.engine.recurring_settings`; the pass that enqueues due
occurrences is :mod:`later_django.engine.recurring_pass`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack
from django.db import transaction

from later_django.core import clock
from later_django.core.keys import recurring_due_key, recurring_key, recurring_key_bounds
from later_django.engine.recurring_schedule import next_tick_ms, validate_cron, validate_timezone
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
    for keys in key_pages(kv, start, stop, _PAGE):
        values = kv.get_many(keys)
        for key in keys:
            raw = values.get(key)
            if raw is None:
                continue
            try:
                definitions.append(decode_definition(raw))
            except RecordDecodeError as error:
                logger.error("recurring definition %s cannot be decoded: %s", key, error)
    return definitions


def key_pages(kv: KeyValuePort, start: str, stop: str, page: int) -> Iterator[list[str]]:
    """The live keys ``start <= k < stop``, up to ``page`` at a time (no empty page).

    A page after the first starts AT the last key of the one before, which it reads
    again and drops: the key after ``k`` cannot be spelt ``k + "\\x01"`` on MySQL, whose
    ``utf8mb4_bin`` pads with spaces, so ``k + "\\x01"`` sorts before ``k`` there and a
    page would repeat it (decision 271). A page asks one key more to make up for it."""
    after: str | None = None
    while True:
        want = page if after is None else page + 1
        keys = kv.key_scan(start if after is None else after, stop, want)
        full = len(keys) == want
        if after is not None and keys[:1] == [after]:
            keys = keys[1:]
        if keys:
            yield keys
        if not full:
            return
        after = keys[-1]


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
