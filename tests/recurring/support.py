"""Helpers of the recurring tests: read job records and definitions straight from storage."""

from __future__ import annotations

from later_django.core.keys import recurring_due_key, recurring_key
from later_django.core.records import JobRecord, decode_record
from later_django.engine.recurring import RecurringDefinition, encode_definition, get_recurring
from later_django.storage.stores import stores_for
from later_django.storage.types import Delete, Set

NAMESPACE = "default"


def job_records(alias: str) -> list[JobRecord]:
    """Every job record of the namespace, oldest first (ids are ULIDs)."""
    storage = stores_for(alias)
    keys = [
        key
        for key in storage.kv.key_scan(f"{NAMESPACE}-job-", f"{NAMESPACE}-job.", 100_000)
        if key.count("-") == 2
    ]
    values = storage.kv.get_many(keys)
    return [decode_record(values[key]) for key in keys if key in values]


def occurrences(alias: str, recurring_id: str) -> list[JobRecord]:
    return [record for record in job_records(alias) if record.recurring_id == recurring_id]


def definition(alias: str, recurring_id: str) -> RecurringDefinition | None:
    return get_recurring(stores=stores_for(alias), namespace=NAMESPACE, recurring_id=recurring_id)


def move_next_run(alias: str, recurring_id: str, next_run_ms: int) -> RecurringDefinition:
    """Rewrites the stored next run (as if the schedule had been left that way by a
    process that then stopped), index key included."""
    old = definition(alias, recurring_id)
    assert old is not None
    new = RecurringDefinition(**{**old.__dict__, "next_run_ms": next_run_ms})
    stores_for(alias).kv.apply(
        [
            Delete(recurring_due_key(NAMESPACE, old.next_run_ms, recurring_id)),
            Set(recurring_key(NAMESPACE, recurring_id), encode_definition(new)),
            Set(recurring_due_key(NAMESPACE, next_run_ms, recurring_id), b""),
        ]
    )
    return new


def store(alias: str, stored: RecurringDefinition) -> None:
    """Writes ``stored`` and its index key directly (e.g. a definition whose task is gone)."""
    stores_for(alias).kv.apply(
        [
            Set(recurring_key(NAMESPACE, stored.id), encode_definition(stored)),
            Set(recurring_due_key(NAMESPACE, stored.next_run_ms, stored.id), b""),
        ]
    )
