"""Queue limits: how the claim of a limited queue obeys ``LATER["QUEUE_LIMITS"]``.

A queue with ``concurrency`` N has N *slots*, the keys ``<ns>-slot-<queue>-<n>`` of
``later_storage`` held through the one fenced lease
(:class:`~later_django.storage.leases.LeaseStore` on
:data:`~later_django.storage.queries.leases.PASS_LEASES`): a running job of the
queue holds one, its worker renews it with its other leases, and a dead worker's
slots lapse with their lease, so no job waits for ever. A queue with a ``rate``
keeps the start times of its window in ``<ns>-rate-<queue>`` (int64 milliseconds,
oldest first), read under a row lock.

:func:`claim_limited` is one transaction: the rate row locked and its allowance
counted, the free or lapsed slots taken, at most that many messages claimed, the
slots left over given back, the new start times appended. So across every worker
and host at most N jobs of the queue hold a slot, and at most ``count`` claims fall
in any window. Jobs over a limit stay queued; they do not fail.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from django.db import transaction

from later_django.core.clock import now_ms
from later_django.core.keys import queue_rate_key, queue_slot_key
from later_django.core.limits import QueueLimit
from later_django.storage.leases import LeaseStore
from later_django.storage.queries.leases import PASS_LEASES
from later_django.storage.stores import Stores
from later_django.storage.types import ClaimedMessage


@dataclass
class LimitedClaim:
    """What :func:`claim_limited` claimed: the messages, and the slot (key -> epoch)
    of each, in message order (empty without a concurrency limit)."""

    messages: list[ClaimedMessage] = field(default_factory=list)
    slots: list[tuple[str, int]] = field(default_factory=list)


def _leases(stores: Stores) -> LeaseStore:
    return LeaseStore(stores.driver, PASS_LEASES)


def claim_limited(
    stores: Stores,
    namespace: str,
    owner: str,
    queue_name: str,
    limit: QueueLimit,
    wanted: int,
    lease_ms: int,
) -> LimitedClaim:
    """Claims at most ``wanted`` messages of ``queue_name`` within ``limit`` (see the
    module); one transaction (call outside one). Each claimed message comes with a
    slot when the queue has a concurrency limit; the claims count as starts of
    the rate window."""
    if wanted <= 0:
        return LimitedClaim()
    owner_bytes = owner.encode()
    leases = _leases(stores)
    with transaction.atomic(using=stores.using):
        allowed = wanted
        starts: array[int] | None = None
        rate_key = queue_rate_key(namespace, queue_name)
        if limit.rate_count is not None and limit.rate_window_ms is not None:
            starts = _locked_starts(stores, rate_key)
            # Read after the lock: a claimer that waited for it counts from now.
            now = now_ms()
            starts = _since(starts, now - limit.rate_window_ms)
            allowed = min(allowed, limit.rate_count - len(starts))
        else:
            now = now_ms()
        taken: dict[tuple[str], int] = {}
        if limit.concurrency is not None and allowed > 0:
            keys = [(queue_slot_key(namespace, queue_name, n),) for n in range(limit.concurrency)]
            taken = leases.take((), owner_bytes, keys, until_ms=now + lease_ms, now_ms=now)
            allowed = min(allowed, len(taken))
        messages: list[ClaimedMessage] = []
        if allowed > 0:
            messages = stores.queue.claim(
                namespace, [queue_name], owner, lease_ms, batch_size=allowed
            )
        slots = sorted(taken.items())
        unused = [slot for slot, _ in slots[len(messages) :]]
        if unused:
            leases.release((), owner_bytes, unused, now_ms=now)
        if starts is not None and messages:
            starts.extend([now] * len(messages))
            stores.kv.set(rate_key, starts.tobytes())
    return LimitedClaim(messages, [(key, epoch) for (key,), epoch in slots[: len(messages)]])


def _locked_starts(stores: Stores, rate_key: str) -> array[int]:
    """The start times kept under ``rate_key``, oldest first, its row locked for the
    transaction (created empty first, so there is a row to lock)."""
    stores.kv.set_if_absent(rate_key, b"")
    raw = stores.kv.get_many_for_update([rate_key]).get(rate_key, b"")
    starts: array[int] = array("q")
    starts.frombytes(raw[: len(raw) - len(raw) % starts.itemsize])
    return starts


def _since(starts: array[int], since_ms: int) -> array[int]:
    first = next((i for i, at in enumerate(starts) if at >= since_ms), len(starts))
    return starts[first:]


def renew_slots(stores: Stores, owner: str, held: dict[str, int], *, until_ms: int) -> set[str]:
    """Extends the slots ``held`` (key -> epoch) that ``owner`` still holds at their
    epochs; returns those keys."""
    if not held:
        return set()
    kept = _leases(stores).renew(
        (),
        owner.encode(),
        {(key,): epoch for key, epoch in held.items()},
        until_ms=until_ms,
        now_ms=now_ms(),
    )
    return {key for (key,) in kept}


def release_slots(stores: Stores, owner: str, keys: list[str]) -> None:
    """Gives back ``owner``'s slots ``keys`` (one write)."""
    if keys:
        _leases(stores).release((), owner.encode(), [(key,) for key in keys], now_ms=now_ms())
