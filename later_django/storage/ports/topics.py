"""The topic port: each topic's fixed partition count.

``TopicPort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class TopicPort(Protocol):
    """Each topic's fixed partition count in ``later_topic``, recorded once. Implemented by
    :class:`~later_django.storage.topics.TopicStore`."""

    def stored_partitions(self, namespace: str, topic: str) -> int | None:
        """The partition count recorded for ``topic`` in ``namespace``, or ``None``."""

    def record_if_absent(self, namespace: str, topic: str, partitions: int) -> int:
        """Records ``topic`` with ``partitions`` unless a count is recorded already; returns the
        count recorded after the call (``partitions``, or the one found)."""
