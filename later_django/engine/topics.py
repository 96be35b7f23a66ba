"""Topics: their fixed partition layout, key routing, and registration in ``later_topic``.

A topic is configured in ``LATER["TOPICS"]`` with a partition count. The count
is part of the topic's identity: keys are routed by ``hash(key) % partitions``,
so producers that disagree on it would break per-key order. The first process
to use a topic in a namespace records its count in ``later_topic``; any later
use with another count raises :class:`TopicLayoutMismatch` before writing
anything. Job partitions and retained logs share this layout.

``__later_recurring__`` is reserved: sequential recurring jobs run there, keyed
by their recurring id.
"""

from __future__ import annotations

import hashlib

from django.db import IntegrityError, transaction

from later_django.clock import now_ms
from later_django.conf import LaterSettings
from later_django.exceptions import LaterError

RECURRING_TOPIC = "__later_recurring__"
RECURRING_TOPIC_PARTITIONS = 16


class TopicNotConfigured(LaterError, ValueError):
    """A topic that is not in ``LATER["TOPICS"]`` (nor reserved) was used."""


class TopicLayoutMismatch(LaterError):
    """A topic's configured partition count differs from the one stored for it."""


def configured_topics(settings: LaterSettings) -> dict[str, int]:
    """Topic name → partition count: ``LATER["TOPICS"]`` plus the reserved topics."""
    return {**settings.topics, RECURRING_TOPIC: RECURRING_TOPIC_PARTITIONS}


def topic_partitions(settings: LaterSettings, topic: str) -> int:
    """The configured partition count of ``topic``; raises ``TopicNotConfigured``."""
    try:
        return configured_topics(settings)[topic]
    except (KeyError, TypeError):
        known = sorted(settings.topics)
        raise TopicNotConfigured(
            f"topic {topic!r} is not configured; add it to LATER['TOPICS'] (configured: {known})"
        ) from None


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


def stored_partitions(using: str, namespace: str, topic: str) -> int | None:
    """The partition count recorded for ``topic`` in ``namespace``, or None."""
    from later_django.models import Topic

    row = (
        Topic.objects.using(using)
        .filter(namespace=namespace, topic=topic)
        .values_list("partitions", flat=True)
        .first()
    )
    return row


def register_topic(using: str, namespace: str, topic: str, partitions: int) -> None:
    """Records ``topic`` with ``partitions`` unless it is already recorded; raises
    ``TopicLayoutMismatch`` when the recorded count differs. Safe under races:
    two processes registering at once both end up comparing with one stored row."""
    from later_django.models import Topic

    stored = stored_partitions(using, namespace, topic)
    if stored is None:
        try:
            with transaction.atomic(using=using):
                Topic.objects.using(using).create(
                    namespace=namespace, topic=topic, partitions=partitions, created_at=now_ms()
                )
            return
        except IntegrityError:
            stored = stored_partitions(using, namespace, topic)
    if stored != partitions:
        raise TopicLayoutMismatch(
            f"topic {topic!r} in namespace {namespace!r} has {stored} partitions in the "
            f"database but {partitions} in LATER['TOPICS']; a topic's partition count is "
            f"fixed (keys are routed by it). Use a new topic name to change the layout."
        )


def register_configured_topics(using: str, settings: LaterSettings) -> None:
    """Registers every configured topic (worker start); raises on the first mismatch."""
    for topic, partitions in configured_topics(settings).items():
        register_topic(using, settings.namespace, topic, partitions)
