"""``SqlDeliveryQueue``: the leased delivery queue in ``later_delivery_queue``.

Every method is one statement on its driver's connection, so it joins the
caller's transaction when there is one (a published message commits with the
caller's data) and runs in autocommit otherwise. The exceptions: a claim runs
in the driver's ``write_transaction`` (SQLite: ``BEGIN IMMEDIATE`` with the
recommended ``transaction_mode``, or a savepoint inside the caller's
transaction; MySQL: a transaction, as its claim is several statements:
:class:`ClaimSteps`), and a publish larger than one statement (SQLite's
bound-variable limit, MySQL's packet) is split into chunks inside one ``atomic``
block.

Depth is never counted here: triggers keep ``later_queue_depth`` exact (see
migration ``0002``) and :meth:`SqlDeliveryQueue.depth` sums its shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from django.db import DatabaseError

from later_django.core.clock import now_ms
from later_django.storage.driver import Driver, Row, as_bytes, prefix_placeholders
from later_django.storage.queries.queue import WAKE_CHANNEL, QueueQueries
from later_django.storage.types import ClaimedMessage

#: The attribute of a ``DatabaseError`` raised by a claim in steps after it chose its
#: messages: their sequences. The claim may have committed though its answer was lost
#: (MariaDB's ``KILL CONNECTION`` during the ``COMMIT``), so the owner hands them back
#: (:func:`claim_in_doubt`; a nack by owner changes nothing when it did not commit).
IN_DOUBT = "later_claim_in_doubt"


def claim_in_doubt(error: BaseException) -> list[int]:
    """The sequences a failed :meth:`SqlDeliveryQueue.claim` may have leased."""
    return list(getattr(error, IN_DOUBT, ()))


#: django.tasks' priority range; higher is claimed first.
MIN_PRIORITY = -100
MAX_PRIORITY = 100


class ClaimSteps(str):
    """A claim that a vendor runs as several statements, the batch chosen here between
    them (MySQL/MariaDB: no ``RETURNING``, no ``LATERAL``, no ``UPDATE`` in a ``WITH``),
    all in the driver's ``write_transaction``:

    1. ``served`` (namespace, now), only when the claim serves every queue: the names
       of the namespace's queues that hold a ready message;
    2. ``head`` (namespace, queue_name, now, batch_size): one queue's ready messages in
       claim order, at most a batch, locked (``FOR UPDATE SKIP LOCKED``), as rows of
       ``HEAD_COLUMNS``. Several queues are one statement: each queue's head in
       parentheses, joined by ``UNION ALL``, its ``queue_name`` renamed ``q<n>_queue_name``
       (never ``queue_name IN (...)``, which sorts, so locks, every candidate);
    3. here: the heads merged in claim order, at most a batch, and the batch-or-one
       rule of migration 0003 (the whole batch when it is full, else the first);
    4. ``take`` (sequences, owner, lease_until): leases the chosen messages and adds
       one delivery to each. The claimed rows are the heads' rows with the new lease
       and count: no read after the write, and no record (as on SQLite).

    Candidates that lose the merge stay locked until the claim commits, as on
    PostgreSQL (migration 0016). A ``str`` (as :class:`~later_django.storage.driver.
    Returning` is), so the query classes keep their types; its text, for logs, is
    every step behind a word no SQL starts with: run as one statement by mistake,
    the server refuses it before any write."""

    head: str
    take: str
    served: str

    def __new__(cls, *, head: str, take: str, served: str) -> ClaimSteps:
        statement = super().__new__(cls, "CLAIM_IN_STEPS " + ";\n".join([served, head, take]))
        statement.head, statement.take, statement.served = head, take, served
        return statement


#: The columns of a :class:`ClaimSteps` head's rows.
HEAD_COLUMNS = "sequence, queue_name, payload, priority, available_at, deliveries"
#: A head's parameters that every queue's part shares (``queue_name`` is its own).
_SHARED_BY_HEADS = frozenset({"namespace", "now", "batch_size"})


@lru_cache(maxsize=64)
def heads_statement(head: str, count: int) -> str:
    """``count`` queues' heads as one statement (see :class:`ClaimSteps`): the same
    fixed text repeated, each part's ``queue_name`` renamed ``q<n>_queue_name``."""
    parts = [prefix_placeholders(head, f"q{at}_", _SHARED_BY_HEADS) for at in range(count)]
    if count == 1:
        return parts[0]
    return " UNION ALL ".join(f"({part})" for part in parts)


class SqlDeliveryQueue:
    """The delivery queue (:class:`~later_django.storage.ports.queue.QueuePort`) on one driver.

    Invariants: a message is ready when due and either unleased or its lease
    has lapsed; claims take ready messages by ``priority`` (highest first) then
    ``sequence`` (oldest first); only the current lease owner can renew, ack or
    nack a message, so a consumer whose lease was taken over changes nothing.
    """

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(QueueQueries)

    @property
    def using(self) -> str:
        """The database alias of the queue's table."""
        return self._driver.using

    # --- publish ---

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
        """Inserts one message per payload and returns their sequences, in payload order.

        With ``notify`` (PostgreSQL only; ignored on SQLite) the same statement
        calls ``pg_notify(WAKE_CHANNEL, notify)``: listeners are woken when the
        transaction commits, and PostgreSQL folds identical notifications of one
        transaction into one, so a transaction wakes workers once however many
        publishes it makes.

        One statement for the batch (SQLite: one per chunk of its bound-variable
        limit, MySQL: of its packet, all in one transaction; MySQL answers the
        sequences from the ids its inserts took). ``available_at_ms`` defaults to now; a
        later time defers the messages. Raises ``ValueError`` for an empty
        ``queue_name`` or a ``priority`` outside -100..100, before writing anything.
        """
        rows, shared = _publish_rows(namespace, queue_name, payloads, priority, available_at_ms)
        if not rows:
            return []
        statement = self._q.publish
        if notify is not None:
            statement = self._q.publish_notify
            shared.update(channel=WAKE_CHANNEL, notify=notify)
        returned = self._driver.execute_rows(statement, rows, shared, returning=True)
        # RETURNING order is unspecified; sequences grow in payload order.
        return sorted(row[0] for row in returned)

    def publish_part(
        self,
        namespace: str,
        queue_name: str,
        payloads: Sequence[bytes],
        priority: int = 0,
        available_at_ms: int | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """The statement and parameters of ``publish`` (validated alike; a combined
        write's part, so at least one payload)."""
        rows, shared = _publish_rows(namespace, queue_name, payloads, priority, available_at_ms)
        return self._driver.rows_part(self._q.publish, rows, shared)

    def wake_tail(self, namespace: str) -> tuple[str, dict[str, Any]]:
        """The final ``SELECT`` of a combined write (PostgreSQL) that wakes the workers
        listening on ``WAKE_CHANNEL`` (delivered at commit) for ``namespace``."""
        return self._q.wake_tail, {"channel": WAKE_CHANNEL, "namespace": namespace}

    def wake(self, namespace: str) -> None:
        """Wakes the idle workers of ``namespace`` when the caller's transaction commits:
        a notification on ``WAKE_CHANNEL`` where the driver sends them (PostgreSQL);
        nothing elsewhere (SQLite's workers see every commit in their change counter)."""
        if self._driver.wants_wake_notification():
            self._driver.fetch_one(*self.wake_tail(namespace))

    def ack_part(self, owner: str, sequences: Sequence[int]) -> tuple[str, dict[str, Any]]:
        """The statement and parameters of ``ack`` (a combined write's part)."""
        return self._q.ack, self._owned(owner, _sequences(sequences))

    def _owned(self, owner: str, wanted: list[int]) -> dict[str, Any]:
        """The parameters naming ``owner``'s leases of ``wanted`` (from :func:`_sequences`)."""
        return {"owner": owner, "sequences": self._driver.list_param(wanted)}

    # --- claim ---

    def claim(
        self,
        namespace: str,
        queue_names: Sequence[str] | None,
        owner: str,
        lease_ms: int,
        batch_size: int = 16,
    ) -> list[ClaimedMessage]:
        """Leases ready messages of ``queue_names`` (``None``: of every queue) to ``owner``
        for ``lease_ms``.

        Ready: in ``namespace``, due, and unleased or with a lapsed lease. With at
        least ``batch_size`` ready it takes ``batch_size``, else one. Each claimed
        message's ``deliveries`` grows by one in the same statement
        (:attr:`ClaimedMessage.deliveries`, the new count). On PostgreSQL
        the same statement reads the job record each message names
        (:attr:`ClaimedMessage.record`; migration 0008). One statement
        (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so concurrent claimers never wait
        on each other's rows nor get the same message; SQLite: inside ``BEGIN
        IMMEDIATE``); on MySQL the steps of :class:`ClaimSteps` in one transaction,
        with ``SKIP LOCKED`` as on PostgreSQL. Returns the messages in claim order
        (priority descending, then sequence). Raises ``ValueError`` for empty
        ``queue_names`` (``None``, not ``[]``, means every queue), ``lease_ms`` ≤ 0
        or ``batch_size`` < 1.
        """
        names = self._queue_names_param(queue_names)
        _check_positive("lease_ms", lease_ms)
        _check_positive("batch_size", batch_size)
        now = now_ms()
        # One distinct queue (most workers): its head alone, no merge to plan.
        single = queue_names[0] if queue_names and len(set(queue_names)) == 1 else None
        params = {
            "namespace": namespace,
            "queue_names": names,
            "queue_name": single,
            "now": now,
            "batch_size": batch_size,
            "owner": owner,
            "lease_until": now + lease_ms,
        }
        statement = self._q.claim if single is None else self._q.claim_one_queue
        chosen: list[int] = []
        try:
            with self._driver.write_transaction():
                if isinstance(statement, ClaimSteps):
                    rows = self._claim_in_steps(statement, params, queue_names, chosen)
                else:
                    rows = self._driver.fetch_all(statement, params)
        except DatabaseError as error:
            if chosen:
                setattr(error, IN_DOUBT, tuple(chosen))
            raise
        messages = [_claimed_message(row) for row in rows]
        # RETURNING order is unspecified on both databases.
        messages.sort(key=lambda message: (-message.priority, message.sequence))
        return messages

    def _claim_in_steps(
        self,
        steps: ClaimSteps,
        params: dict[str, Any],
        queue_names: Sequence[str] | None,
        chosen_out: list[int],
    ) -> list[Row]:
        """The claim of :class:`ClaimSteps`, inside the caller's ``write_transaction``:
        the claimed rows (``COLUMNS``, no record), in no particular order. The chosen
        sequences go to ``chosen_out`` before they are leased."""
        if queue_names is None:
            served = [name for (name,) in self._driver.fetch_all(steps.served, params)]
        else:
            served = list(dict.fromkeys(queue_names))
        if not served:
            return []
        named = {f"q{at}_queue_name": name for at, name in enumerate(served)}
        heads = self._driver.fetch_all(heads_statement(steps.head, len(served)), params | named)
        batch_size = params["batch_size"]
        # Claim order: priority descending, then sequence (HEAD_COLUMNS 3 and 0).
        candidates = sorted(heads, key=lambda row: (-row[3], row[0]))[:batch_size]
        chosen = candidates if len(candidates) >= batch_size else candidates[:1]
        if not chosen:
            return []
        owner, lease_until = params["owner"], params["lease_until"]
        chosen_out.extend(sorted(row[0] for row in chosen))
        wanted = self._driver.list_param(list(chosen_out))
        taken = {"sequences": wanted, "owner": owner, "lease_until": lease_until}
        self._driver.execute(steps.take, taken)
        return [
            (sequence, queue_name, payload, priority, available_at, owner, lease_until, count + 1)
            for sequence, queue_name, payload, priority, available_at, count in chosen
        ]

    def has_ready(self, namespace: str, queue_names: Sequence[str] | None) -> bool:
        """Whether a claim of ``queue_names`` (``None``: every queue) would find a message
        now: a read that takes no write lock (idle SQLite workers ask this before they
        claim)."""
        params = {
            "namespace": namespace,
            "queue_names": self._queue_names_param(queue_names),
            "now": now_ms(),
        }
        return self._driver.fetch_one(self._q.has_ready, params) is not None

    def _queue_names_param(self, queue_names: Sequence[str] | None) -> Any:
        """The statements' ``queue_names``: the checked list, or ``NULL`` for every queue
        (the statement then applies no queue condition at all)."""
        if queue_names is None:
            return None
        return self._driver.list_param(_check_queue_names(queue_names))

    # --- the owner's lease ---

    def renew(self, owner: str, sequences: Sequence[int], lease_ms: int) -> list[int]:
        """Extends ``owner``'s leases to now + ``lease_ms``; returns the sequences it
        still held, ascending. A message acked, handed back or reclaimed by another
        owner is left alone (and left out). Raises ``ValueError`` for ``lease_ms`` ≤ 0."""
        _check_positive("lease_ms", lease_ms)
        wanted = _sequences(sequences)
        if not wanted:
            return []
        params = {**self._owned(owner, wanted), "lease_until": now_ms() + lease_ms}
        rows = self._driver.fetch_all(self._q.renew, params)
        return sorted(row[0] for row in rows)

    def ack(self, owner: str, sequences: Sequence[int]) -> int:
        """Deletes the messages of ``sequences`` that ``owner`` still leases; returns how
        many. Acking a claimed row leaves the depth counter unchanged."""
        wanted = _sequences(sequences)
        if not wanted:
            return 0
        return self._driver.execute(self._q.ack, self._owned(owner, wanted))

    def delete_unclaimed(self, sequence: int) -> bool:
        """Deletes the message ``sequence`` if it carries no lease (never claimed, or
        handed back); ``True`` if it was deleted. A leased message is left alone, also
        when its lease has lapsed: the next claim takes it and drops it if its job is gone."""
        return self._driver.execute(self._q.delete_unclaimed, {"sequence": sequence}) > 0

    def nack(self, owner: str, sequences: Sequence[int], delay_ms: int = 0) -> int:
        """Hands the messages ``owner`` still leases back, ready again at now + ``delay_ms``,
        each with its claim's delivery taken back (``deliveries`` one less, never below
        0); returns how many. Raises ``ValueError`` for a negative ``delay_ms``."""
        if _int("delay_ms", delay_ms) < 0:
            raise ValueError(f"delay_ms must be 0 or more, not {delay_ms!r}")
        wanted = _sequences(sequences)
        if not wanted:
            return 0
        params = {**self._owned(owner, wanted), "available_at": now_ms() + delay_ms}
        return self._driver.execute(self._q.nack, params)

    # --- depth ---

    def depth(self, namespace: str, queue_name: str | None = None) -> int:
        """Ready (unleased) messages of ``queue_name``, or of every queue of ``namespace``
        when ``queue_name`` is ``None``.

        Read from the trigger-kept counter, summed over its shards (O(1)). Deferred
        messages count (they are unleased); lapsed leases do not until handed back
        or reconciled.
        """
        if queue_name is None:
            row = self._driver.fetch_one(self._q.depth_of_namespace, {"namespace": namespace})
        else:
            row = self._driver.fetch_one(
                self._q.depth_of_queue, {"namespace": namespace, "queue_name": queue_name}
            )
        # PostgreSQL sums bigint into numeric; a negative total cannot be a depth.
        return max(0, int(row[0])) if row else 0


def _publish_rows(
    namespace: str,
    queue_name: str,
    payloads: Sequence[bytes],
    priority: int,
    available_at_ms: int | None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows (one per payload, in payload order) and shared parameters of a publish,
    after the checks (``ValueError`` for an empty queue name or a priority out of
    range, ``TypeError`` for a payload that is not bytes)."""
    _check_queue_name(queue_name)
    _check_priority(priority)
    rows = [{"payload": _payload_bytes(payload)} for payload in payloads]
    available_at = now_ms() if available_at_ms is None else _int("available_at_ms", available_at_ms)
    shared = {
        "namespace": namespace,
        "queue_name": queue_name,
        "priority": priority,
        "available_at": available_at,
    }
    return rows, shared


def _claimed_message(row: Sequence[Any]) -> ClaimedMessage:
    """A claimed row (``COLUMNS``); two more columns where the claim read the record
    too (the key it looked up, its value)."""
    sequence, queue_name, payload, priority, available_at, lease_owner, lease_until = row[:7]
    record = None
    if len(row) > 8 and row[8] is not None:
        record = (row[8], None if row[9] is None else as_bytes(row[9]))
    return ClaimedMessage(
        sequence=sequence,
        queue_name=queue_name,
        payload=as_bytes(payload),
        priority=priority,
        available_at_ms=available_at,
        lease_owner=lease_owner,
        lease_until_ms=lease_until,
        deliveries=row[7],
        record=record,
    )


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, not {value!r}")
    return value


def _check_priority(priority: Any) -> None:
    if _int("priority", priority) < MIN_PRIORITY or priority > MAX_PRIORITY:
        raise ValueError(
            f"priority {priority!r} is outside the range {MIN_PRIORITY}..{MAX_PRIORITY}"
        )


def _check_positive(name: str, value: Any) -> None:
    if _int(name, value) < 1:
        raise ValueError(f"{name} must be at least 1, not {value!r}")


def _check_queue_name(queue_name: Any) -> None:
    if not isinstance(queue_name, str) or not queue_name:
        raise ValueError(f"queue_name must be a non-empty string, not {queue_name!r}")


def _check_queue_names(queue_names: Any) -> list[str]:
    if isinstance(queue_names, str):
        raise ValueError(
            f"queue_names must be a sequence of queue names, not the string {queue_names!r}"
        )
    names = list(queue_names)
    if not names:
        raise ValueError(f"queue_names must name at least one queue, not {queue_names!r}")
    for name in names:
        _check_queue_name(name)
    return names


def _payload_bytes(payload: Any) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, bytearray | memoryview):
        return bytes(payload)
    raise TypeError(f"a payload must be bytes, not {type(payload).__name__}")


def _sequences(sequences: Sequence[int]) -> list[int]:
    """Distinct sequences in ascending order, so rows are always locked in key order."""
    return sorted({_int("sequence", sequence) for sequence in sequences})
