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

from later_django.conf import LaterSettings
from later_django.core.topics import RECURRING_TOPIC, RECURRING_TOPIC_PARTITIONS
from later_django.exceptions import TopicLayoutMismatch, TopicNotConfigured
from later_django.storage.stores import Stores


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


def stored_partitions(stores: Stores, namespace: str, topic: str) -> int | None:
    """The partition count recorded for ``topic`` in ``namespace``, or None."""
    return stores.topics.stored_partitions(namespace, topic)


def register_topic(stores: Stores, namespace: str, topic: str, partitions: int) -> None:
    """Records ``topic`` with ``partitions`` unless it is already recorded; raises
    ``TopicLayoutMismatch`` when the recorded count differs. Safe under races:
    two processes registering at once both end up comparing with one stored row,
    and a mismatch inside the caller's transaction leaves that transaction usable."""
    stored = stores.topics.record_if_absent(namespace, topic, partitions)
    if stored != partitions:
        raise TopicLayoutMismatch(
            f"topic {topic!r} in namespace {namespace!r} has {stored} partitions in the "
            f"database but {partitions} in LATER['TOPICS']; a topic's partition count is "
            f"fixed (keys are routed by it). Use a new topic name to change the layout."
        )


def register_configured_topics(stores: Stores, settings: LaterSettings) -> None:
    """Registers every configured topic (worker start); raises on the first mismatch."""
    for topic, partitions in configured_topics(settings).items():
        register_topic(stores, settings.namespace, topic, partitions)
