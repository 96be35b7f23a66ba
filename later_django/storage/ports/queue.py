"""The queue port: the leased delivery queue.

``QueuePort``: see its docstring for the contracts, and the package docstring
(:mod:`later_django.storage.ports`) for those every port shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from later_django.storage.types import ClaimedMessage


@runtime_checkable
class QueuePort(Protocol):
    """The leased delivery queue: publish, claim a batch, renew, ack, hand back. Implemented by
    :class:`~later_django.storage.queue.SqlDeliveryQueue`."""

    @property
    def using(self) -> str:
        """The database alias of the queue's table."""

    def publish(
        self,
        namespace: str,
        queue_name: str,
        payloads: Sequence[bytes],
        priority: int = 0,
        available_at_ms: int | None = None,
        *,
        notify: str | None = None,
    ) -> list[int]:
        """Inserts one message per payload and returns their sequences, in payload order."""

    def claim(
        self,
        namespace: str,
        queue_names: Sequence[str] | None,
        owner: str,
        lease_ms: int,
        batch_size: int = 16,
    ) -> list[ClaimedMessage]:
        """Leases ready messages of ``queue_names`` to ``owner`` for ``lease_ms``; ``None``:
        of every queue of the namespace, whatever its name. Counts each message's
        delivery in the same statement (``ClaimedMessage.deliveries``)."""

    def has_ready(self, namespace: str, queue_names: Sequence[str] | None) -> bool:
        """Whether a claim of ``queue_names`` (``None``: every queue) would find a message now:
        a read that takes no write lock (idle SQLite workers ask this before they claim)."""

    def wake(self, namespace: str) -> None:
        """Wakes the idle workers of ``namespace`` when the caller's transaction commits
        (a notification where the driver has them; nothing where workers watch commits)."""

    def renew(self, owner: str, sequences: Sequence[int], lease_ms: int) -> list[int]:
        """Extends ``owner``'s leases to now + ``lease_ms``; returns the sequences it still held,
        ascending. A message acked, handed back or reclaimed by another owner is left alone
        (and left out). Raises ``ValueError`` for ``lease_ms`` ≤ 0."""

    def ack(self, owner: str, sequences: Sequence[int]) -> int:
        """Deletes the messages of ``sequences`` that ``owner`` still leases; returns how many.
        Acking a claimed row leaves the depth counter unchanged."""

    def delete_unclaimed(self, sequence: int) -> bool:
        """Deletes the message ``sequence`` if it carries no lease (never claimed, or
        handed back); ``True`` if it was deleted. A leased message is left alone, also
        when its lease has lapsed: the next claim takes it and drops it if its job is gone."""

    def nack(self, owner: str, sequences: Sequence[int], delay_ms: int = 0) -> int:
        """Hands the messages ``owner`` still leases back, ready again at now + ``delay_ms``,
        their claims' deliveries taken back; returns how many. Raises ``ValueError`` for
        a negative ``delay_ms``."""

    def depth(self, namespace: str, queue_name: str | None = None) -> int:
        """Ready (unleased) messages of ``queue_name``, or of every queue of ``namespace``
        when ``queue_name`` is ``None``."""
