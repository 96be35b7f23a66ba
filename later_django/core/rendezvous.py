"""Rendezvous (highest random weight) hashing: which candidate owns a thing.

The one hash behind partition preference (workers over topic partitions) and
consumer-group assignment (members over log partitions). Every process that
sees the same candidates computes the same owner, without talking to the
others; when a candidate leaves, only the things it owned move.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def score(candidate: str, *scope: object) -> int:
    """The candidate's weight for the thing named by ``scope``: BLAKE2b of the scope
    parts and the candidate joined by NUL, so it is stable across processes and
    Python versions (unlike the salted ``hash()``)."""
    text = "\x00".join([*map(str, scope), candidate]).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def owner(candidates: Sequence[str], *scope: object) -> str:
    """The candidate with the highest :func:`score` for ``scope`` (ties by name).
    ``candidates`` must not be empty (``ValueError``)."""
    if not candidates:
        raise ValueError(f"rendezvous owner of {scope!r} needs at least one candidate")
    return max(candidates, key=lambda candidate: (score(candidate, *scope), candidate))
