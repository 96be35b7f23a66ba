"""Unique jobs: a second enqueue while the key's job is in the given stages writes
nothing and gets the existing job.

Each unique job holds ``<ns>-unique-<task path>:<key>`` (``core.keys.unique_key``)
whose value is its job id, written in the enqueue's own transaction:

1. the key is read; when it is absent (never taken, or its period ended),
   ``set_if_absent`` (one statement) takes it for this job;
2. otherwise the holder's record is read: in one of the ``while`` stages, the
   enqueue is a duplicate and returns the holder, having written nothing;
3. otherwise the holder has moved on (finished, or past the stages), and
   ``replace_if`` (compare-and-set on the holder's id) hands the key over; a
   concurrent enqueue that replaced it first is read again from step 1.

Race-free on both databases: on PostgreSQL a second transaction's insert of the
same key waits for the first to commit or roll back, then sees its row; SQLite
runs one writer at a time. A key is released lazily: nothing is written when
the holder finishes; the next enqueue of the key sees that it has.
"""

from __future__ import annotations

from collections.abc import Sequence

from later_django.core.keys import job_key, unique_key
from later_django.core.records import JobRecord, decode_record
from later_django.core.unique import UniqueKey
from later_django.exceptions import RecordDecodeError, UniqueKeyContended
from later_django.storage.stores import Stores

#: Rounds of steps 1 to 3 before giving up (each lost round means another enqueue
#: of the same key committed meanwhile; two are enough unless it keeps churning).
ROUNDS = 5


def claim_unique_keys(
    wanted: Sequence[tuple[str, UniqueKey | None]],
    job_ids: Sequence[str],
    stores: Stores,
    namespace: str,
) -> dict[int, JobRecord | int]:
    """For each job's ``(task path, unique key or None)`` in ``wanted``, claims the key
    for its id in ``job_ids``; returns the duplicates: position -> the holder's record,
    or the position of an earlier job of this batch with the same key. Call inside the
    enqueue's transaction (the keys commit or roll back with the jobs)."""
    duplicates: dict[int, JobRecord | int] = {}
    first_of_key: dict[str, int] = {}
    for position, (task_path, unique) in enumerate(wanted):
        if unique is None:
            continue
        key = unique_key(namespace, task_path, unique.key)
        if key in first_of_key:
            duplicates[position] = first_of_key[key]
            continue
        holder = _claim(stores, namespace, key, task_path, unique, job_ids[position])
        if holder is None:
            first_of_key[key] = position
        else:
            duplicates[position] = holder
    return duplicates


def _claim(
    stores: Stores, namespace: str, key: str, task_path: str, unique: UniqueKey, job_id: str
) -> JobRecord | None:
    """``None`` once ``key`` is this job's; the holder's record for a duplicate."""
    mine = job_id.encode()
    ttl = unique.for_seconds
    for _ in range(ROUNDS):
        # Read first: a duplicate (the common repeat) then writes nothing, so its
        # transaction commits without a write to flush.
        held_by = stores.kv.get(key)
        if held_by is None:
            if stores.kv.set_if_absent(key, mine, ttl):
                return None
            continue  # taken meanwhile: read who holds it
        holder = _record(stores, namespace, held_by.decode(errors="replace"))
        if holder is not None and holder.stage in unique.while_stages:
            return holder
        if stores.kv.replace_if(key, held_by, mine, ttl):
            return None
    raise UniqueKeyContended(
        f"unique key {unique.key!r} of task {task_path} changed hands {ROUNDS} times "
        "while this enqueue tried to take it"
    )


def _record(stores: Stores, namespace: str, job_id: str) -> JobRecord | None:
    raw = stores.kv.get(job_key(namespace, job_id))
    if raw is None:
        return None
    try:
        return decode_record(raw)
    except RecordDecodeError:
        return None
