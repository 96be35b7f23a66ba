"""Topic routing: which partition a key belongs to. Pure: no settings, no database.

A topic's partition count is part of its identity: keys are routed by
``BLAKE2b(key) % partitions``, so producers that disagree on the count would
break per-key order (``engine.topics`` records the count at first use).
``__later_recurring__`` is reserved: sequential recurring jobs run there, keyed
by their recurring id.
"""

from __future__ import annotations

import hashlib

from later_django.core.keys import RESERVED_PREFIX

RECURRING_TOPIC = f"{RESERVED_PREFIX}_recurring__"
RECURRING_TOPIC_PARTITIONS = 16


def key_bytes(key: str | bytes | int) -> bytes:
    """The canonical bytes of a routing key: UTF-8 text, raw bytes, or a decimal int."""
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key).encode()
    raise TypeError(f"a partition key must be str, bytes or int, got {key!r}")


def partition_for_key(key: str | bytes | int, partitions: int) -> int:
    """The partition of ``key``: stable across processes, hosts and Python versions
    (BLAKE2b, not ``hash()``, which is salted per process)."""
    digest = hashlib.blake2b(key_bytes(key), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions
