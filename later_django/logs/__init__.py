"""Retained logs: append-only, replayable records per topic partition, and consumer
groups that share a topic's partitions under fenced leases.

This is a log kept in the application's database, not Kafka: throughput is
bounded by the database, there is no broker, consumers poll, and retention
(``compact``/``cleanup``) runs when you run it. See docs/retained-logs.md.

* ``log(topic)`` → :class:`RetainedLog` (:mod:`.log`): ``append``, ``append_many``,
  ``read``, ``compact``, ``cleanup``. A topic must be in ``LATER["TOPICS"]``; its
  fixed partition count routes keys (the same layout as topic-partitioned jobs).
* ``consumer(group, topic)`` → :class:`Consumer` (:mod:`.consumer`): ``join``/``leave``
  (or ``with``), ``heartbeat``, ``poll``, ``commit``, ``commit_records``,
  ``assignment``. Delivery is at-least-once: commit after processing.
* ``retention_pass(topic, ...)`` (:mod:`.retention`): compaction and cleanup as a
  maintenance pass.

Payloads are bytes (``bytes``, ``bytearray`` or ``memoryview``); ``str`` is
refused, encode it yourself. Keys are ``str`` (stored as UTF-8), ``bytes``,
``int`` (stored as its decimal text) or ``None``; a keyed record goes to the
partition of its key, keyless records are spread round robin (per process) and
are never removed by compaction. Everything writes on ``LATER["DATABASE"]`` and
joins the caller's ``transaction.atomic()``.
"""

from later_django.exceptions import StaleLease
from later_django.logs.consumer import Consumer, consumer
from later_django.logs.log import RetainedLog, log
from later_django.logs.retention import retention_pass
from later_django.logs.topic import LogRecord

__all__ = [
    "Consumer",
    "LogRecord",
    "RetainedLog",
    "StaleLease",
    "consumer",
    "log",
    "retention_pass",
]
