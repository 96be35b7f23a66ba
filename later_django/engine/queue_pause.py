"""Paused queues: a queue whose messages no worker claims until it is resumed.

A pause is one key of ``later_storage`` per queue (``core.keys.paused_queue_key``),
so it survives restarts and every host sharing the namespace reads the same
state. Enqueues into a paused queue still succeed; its jobs wait in the queue.
Jobs already running finish. Workers re-read the paused set at most
:data:`REFRESH_SECONDS` apart before they claim
(:class:`~later_django.worker.claim_queues.ClaimQueues`), so a pause is obeyed
within that time on every host. A resume also wakes idle workers.

Only the delivery queue pauses: jobs on a topic partition are claimed by
partition, not by queue, and keep running.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from later_django.core.clock import now_ms
from later_django.core.keys import (
    RESERVED_PREFIX,
    is_reserved,
    paused_queue_bounds,
    paused_queue_key,
    queue_of_paused_key,
)
from later_django.models.base import NAME_LENGTH
from later_django.storage.stores import Stores

#: The longest a worker claims with a paused set older than this.
REFRESH_SECONDS = 0.5

#: The most paused queues read at once (a worker's refresh, a listing).
MAX_PAUSED = 1000


@dataclass(frozen=True)
class PausedQueue:
    """One paused queue: since when (epoch ms) and who paused it (free text)."""

    name: str
    paused_at_ms: int
    by: str


def check_queue_name(name: object) -> str:
    """``name`` if it can name a queue; ``ValueError`` naming the value and the rule."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a queue name must be a non-empty string, not {name!r}")
    if len(name) > NAME_LENGTH:
        raise ValueError(f"queue name {name[:40]!r}… is longer than {NAME_LENGTH} characters")
    if is_reserved(name):
        raise ValueError(
            f"queue {name!r} cannot be paused: names starting with {RESERVED_PREFIX!r} "
            "are later_django's own"
        )
    return name


def pause_queue(stores: Stores, namespace: str, name: str, *, by: str = "") -> bool:
    """Pauses queue ``name``: one statement, race-free. Returns ``True`` when this call
    paused it, ``False`` when it already was (its original time and author are kept)."""
    value = json.dumps({"paused_at": now_ms(), "by": by}).encode()
    return stores.kv.set_if_absent(paused_queue_key(namespace, check_queue_name(name)), value)


def resume_queue(stores: Stores, namespace: str, name: str) -> bool:
    """Resumes queue ``name`` and wakes idle workers, in one transaction. Returns
    ``True`` when it was paused."""
    key = paused_queue_key(namespace, check_queue_name(name))
    with stores.driver.atomic():
        was_paused = stores.kv.exist(key)
        if was_paused:
            stores.kv.delete(key)
            stores.queue.wake(namespace)
    return was_paused


def paused_queue_names(stores: Stores, namespace: str) -> frozenset[str]:
    """The names of the paused queues (at most :data:`MAX_PAUSED`): one read."""
    start, stop = paused_queue_bounds(namespace)
    return frozenset(
        queue_of_paused_key(namespace, key) for key in stores.kv.key_scan(start, stop, MAX_PAUSED)
    )


def paused_queues(stores: Stores, namespace: str) -> list[PausedQueue]:
    """The paused queues by name, with when and by whom (at most :data:`MAX_PAUSED`)."""
    start, stop = paused_queue_bounds(namespace)
    keys = stores.kv.key_scan(start, stop, MAX_PAUSED)
    values = stores.kv.get_many(keys)
    paused = []
    for key in keys:
        raw = values.get(key)
        if raw is None:  # resumed between the two reads
            continue
        try:
            fields = json.loads(raw)
            paused_at, by = int(fields["paused_at"]), str(fields.get("by", ""))
        except (ValueError, TypeError, KeyError):
            paused_at, by = 0, ""  # still paused: the key is what counts
        paused.append(PausedQueue(queue_of_paused_key(namespace, key), paused_at, by))
    return paused
