"""Which database alias and namespace an overview read is of (defaults from ``LATER``)."""

from __future__ import annotations

from later_django.conf import later_settings
from later_django.models import QueueDepth, StageCount, Topic, Worker


def resolve_target(using: str | None, namespace: str | None) -> tuple[str, str]:
    """``(alias, namespace)``: the given ones, else ``LATER["DATABASE"]``/``["NAMESPACE"]``."""
    settings = later_settings()
    return using or settings.database, namespace or settings.namespace


def namespace_in_use(using: str, namespace: str) -> bool:
    """Whether ``namespace`` is one this project knows: configured (``LATER["NAMESPACE"]``,
    ``LATER["METRICS"]["NAMESPACES"]``) or seen in ``using``'s data: a stage counter
    (every job ever enqueued leaves its rows, which are never deleted), a queue depth,
    a live worker's row, a topic. Each a look at a small table's primary key."""
    settings = later_settings()
    if namespace == settings.namespace or namespace in settings.metrics_namespaces:
        return True
    return any(
        model.objects.using(using).filter(namespace=namespace).exists()
        for model in (StageCount, QueueDepth, Worker, Topic)
    )
