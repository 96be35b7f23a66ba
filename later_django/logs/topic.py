"""What the retained log, its consumers and its retention share: the configured
topic (:class:`LogTopic`), the record as read (:class:`LogRecord`) and the
checks of their arguments (each ``ValueError`` names the argument and the rule)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connections

from later_django.conf import LaterSettings, later_settings
from later_django.core.clock import now_ms
from later_django.core.keys import RESERVED_PREFIX
from later_django.engine.topics import register_topic, topic_partitions
from later_django.exceptions import TopicNotConfigured
from later_django.storage.log import StoredRecord
from later_django.storage.stores import stores_for


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One retained record. ``key`` is the stored key bytes (``None`` when keyless);
    ``appended_at`` is the time of its append (UTC)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    payload: bytes
    appended_at: datetime

    @property
    def next_offset(self) -> int:
        """The offset to commit once this record is processed."""
        return self.offset + 1


#: Later than every append time: the age bound of a cleanup without one.
NO_AGE_LIMIT = 2**62

#: (alias, database name, namespace, topic, partitions) already registered by this process.
_registered: set[tuple[Any, ...]] = set()


class LogTopic:
    """A configured topic on the configured database: namespace, alias, partitions
    and the log store (``TopicNotConfigured`` at construction otherwise)."""

    def __init__(self, topic: str) -> None:
        settings: LaterSettings = later_settings()
        if not isinstance(topic, str) or topic.startswith(RESERVED_PREFIX):
            raise TopicNotConfigured(
                f"topic {topic!r} cannot hold a retained log: use a topic of "
                f"LATER['TOPICS'] (names starting with {RESERVED_PREFIX!r} are reserved)"
            )
        self.topic = topic
        self.partitions = topic_partitions(settings, topic)
        self.namespace = settings.namespace
        self.using = settings.database
        self.store = stores_for(self.using).log

    def ensure_registered(self) -> None:
        """Records the topic's layout in ``later_topic`` once per process and database;
        raises ``TopicLayoutMismatch`` when the stored count differs."""
        marker = (
            self.using,
            str(connections[self.using].settings_dict.get("NAME")),
            self.namespace,
            self.topic,
            self.partitions,
        )
        if marker in _registered:
            return
        register_topic(stores_for(self.using), self.namespace, self.topic, self.partitions)
        _registered.add(marker)

    def check_partition(self, partition: int) -> int:
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise TypeError(f"partition must be an int, got {partition!r}")
        if not 0 <= partition < self.partitions:
            raise ValueError(
                f"partition {partition} is out of range for topic {self.topic!r} "
                f"(partitions 0 to {self.partitions - 1})"
            )
        return partition

    def record(self, partition: int, stored: StoredRecord) -> LogRecord:
        offset, key, payload, appended_at = stored
        return LogRecord(
            self.topic,
            partition,
            offset,
            key,
            payload,
            datetime.fromtimestamp(appended_at / 1000, tz=UTC),
        )


def non_negative(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


def positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_retention_limits(older_than_seconds: Any, keep_last: Any) -> None:
    """Raises ``ValueError`` naming a retention limit that is not a non-negative number."""
    if keep_last is not None:
        non_negative("keep_last", keep_last)
    if older_than_seconds is not None and (
        isinstance(older_than_seconds, bool)
        or not isinstance(older_than_seconds, int | float)
        or older_than_seconds < 0
    ):
        raise ValueError(
            f"older_than_seconds must be a non-negative number, got {older_than_seconds!r}"
        )


def appended_before_ms(older_than_seconds: float | None) -> int:
    """The age bound of a cleanup: records appended before it are old enough."""
    if older_than_seconds is None:
        return NO_AGE_LIMIT
    return now_ms() - int(older_than_seconds * 1000)
