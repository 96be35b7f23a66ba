"""The sqlite driver's statements, one module per store (imported for their registration)."""

from later_django.storage.sqlite.queries import (
    dashboard,
    executions,
    index,
    kv,
    leases,
    log,
    partitions,
    queue,
    topics,
    upkeep,
)

__all__ = [
    "dashboard",
    "executions",
    "index",
    "kv",
    "leases",
    "log",
    "partitions",
    "queue",
    "topics",
    "upkeep",
]
