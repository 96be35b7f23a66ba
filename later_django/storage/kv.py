"""Values and ordered ranges on a Django connection: reads, ``apply``, ``set_if_absent``.

Tables ``later_storage`` (one row per key) and ``later_storage_range`` (one
row per member, ``sequence`` as its stable cursor). Times are epoch ms from
:func:`later_django.core.clock.now_ms`; an expired row reads as absent everywhere
and is deleted later by :meth:`UpkeepStore.sweep_expired
<later_django.storage.upkeep.UpkeepStore.sweep_expired>`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from later_django.core.clock import now_ms
from later_django.models.base import KEY_LENGTH
from later_django.storage.driver import Driver, as_bytes
from later_django.storage.kv_runs import DeleteRun, IncrementRun, RangeAddRun, SetRun, batch_runs
from later_django.storage.queries.kv import NEWEST_FIRST_START, OLDEST_FIRST_START, KvQueries
from later_django.storage.types import (
    Delete,
    Expire,
    Increment,
    RangeAdd,
    RangeClear,
    RangeExpire,
    RangeItem,
    RangeOrder,
    RangePage,
    RangeRemove,
    Set,
    StorageOperation,
)

_OPERATION_NAMES = "Set, Delete, Expire, Increment, RangeAdd, RangeRemove, RangeClear, RangeExpire"
#: Keys and range keys are ``varchar(500)`` (``later_django.models.base.KEY_LENGTH``).
MAX_KEY_LENGTH = KEY_LENGTH
#: Range members are unique per range through a b-tree index, whose entries
#: PostgreSQL caps near 2.7 KB; members are ids and keys, so 1 KiB is plenty.
MAX_RANGE_MEMBER_BYTES = 1024


def check_operation(operation: object) -> None:
    """Raises ``TypeError``/``ValueError`` naming the value when ``operation`` is not one
    ``apply`` can write: an unknown object, a key that is empty or longer than
    ``MAX_KEY_LENGTH``, a value that is not bytes, or a range member over
    ``MAX_RANGE_MEMBER_BYTES``."""
    if not isinstance(
        operation,
        Set | Delete | Expire | Increment | RangeAdd | RangeRemove | RangeClear | RangeExpire,
    ):
        raise TypeError(
            f"apply() got {operation!r}, which is not a storage operation "
            f"(one of {_OPERATION_NAMES})"
        )
    key = operation.key
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH:
        raise ValueError(
            f"storage key {key!r} must be a string of 1 to {MAX_KEY_LENGTH} characters"
        )
    value = getattr(operation, "value", b"")
    if not isinstance(value, bytes):
        raise TypeError(
            f"{type(operation).__name__} value for {key!r} must be bytes, not {value!r}"
        )
    if isinstance(operation, RangeAdd | RangeRemove) and len(value) > MAX_RANGE_MEMBER_BYTES:
        raise ValueError(
            f"range member of {key!r} is {len(value)} bytes; members are at most "
            f"{MAX_RANGE_MEMBER_BYTES} bytes (store large values with Set and add their key)"
        )


def expire_at_ms(now: int, ttl_seconds: float | None) -> int | None:
    """The ``date_expire`` of a value written at ``now`` with ``ttl_seconds`` (``None``: never).

    A TTL of zero or less makes the value expire at once.
    """
    if ttl_seconds is None:
        return None
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
        raise TypeError(f"ttl_seconds must be a number of seconds, got {ttl_seconds!r}")
    if not math.isfinite(ttl_seconds):
        raise ValueError(f"ttl_seconds must be finite, got {ttl_seconds!r}")
    return now + round(ttl_seconds * 1000)


def set_rows(sets: Sequence[Set], now: int) -> list[dict[str, Any]]:
    """The rows of ``KvQueries.set_many`` for ``sets`` (distinct keys), in key order
    (the lock order of concurrent batches)."""
    rows = []
    for op in sorted(sets, key=lambda operation: operation.key):
        expire = expire_at_ms(now, op.ttl_seconds)
        rows.append(
            {"key": op.key, "value": op.value, "date_expire": None, "date_expire_unindexed": expire}
            if op.swept_with_job_index
            else {
                "key": op.key,
                "value": op.value,
                "date_expire": expire,
                "date_expire_unindexed": None,
            }
        )
    return rows


def members_by_range(rows: Iterable[Sequence[Any]]) -> dict[str, list[bytes]]:
    """``(range_key, member)`` rows, each range's oldest first, as the members by range
    (the shape of :meth:`KeyValueStore.range_members_many`)."""
    members: dict[str, list[bytes]] = {}
    for range_key, value in rows:
        members.setdefault(range_key, []).append(as_bytes(value))
    return members


class KeyValueStore:
    """The key-value and range store, on one driver's connection."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._q = driver.queries(KvQueries)

    def get(self, key: str) -> bytes | None:
        """The unexpired value of ``key``, or ``None`` when absent, expired, or a
        counter-only row (one that ``Increment`` created and no ``Set`` gave a value)."""
        row = self._driver.fetch_one(self._q.get, {"key": key, "now": now_ms()})
        return None if row is None else as_bytes(row[0])

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The unexpired values of ``keys`` in one statement; absent, expired and
        counter-only keys are left out."""
        return self._get_many(self._q.get_many, list(keys))

    def get_many_for_update(self, keys: Sequence[str]) -> dict[str, bytes]:
        """``get_many`` that also locks the rows until the transaction ends
        (PostgreSQL ``FOR UPDATE``, in key order; on SQLite the transaction
        already holds the database's write lock). Call it inside ``atomic()``."""
        return self._get_many(self._q.get_many_for_update, sorted(set(keys)))

    def get_many_unswept(self, keys: Sequence[str]) -> dict[str, bytes]:
        """``get_many`` that also returns values past their expiry the sweep has not
        deleted yet (a parent's record its unfinished children keep: the sweep skips it,
        ``engine.parent_holds``). One statement, the same as ``get_many``'s."""
        return self._get_many(self._q.get_many, list(keys), now=0)

    def _get_many(self, sql: str, keys: list[str], now: int | None = None) -> dict[str, bytes]:
        if not keys:
            return {}
        params = {"keys": self._driver.list_param(keys), "now": now_ms() if now is None else now}
        rows = self._driver.fetch_all(sql, params)
        return {key: as_bytes(value) for key, value in rows if value is not None}

    def set(self, key: str, value: bytes) -> None:
        """Sets a value and clears any previous expiry."""
        self.apply([Set(key, value)])

    def delete(self, key: str) -> None:
        """Deletes a value; deleting an absent key succeeds."""
        self.apply([Delete(key)])

    def exist(self, key: str) -> bool:
        """Whether an unexpired value exists."""
        return self.get(key) is not None

    def expire(self, key: str, ttl_seconds: float) -> None:
        """Sets a time-to-live on an existing value; an absent key is not created."""
        self.apply([Expire(key, ttl_seconds)])

    def apply(self, operations: Sequence[StorageOperation], *, savepoint: bool = True) -> None:
        """Applies ``operations`` in order, atomically: all become visible, or none do.

        Runs in one transaction, or inside the caller's ``transaction.atomic()``
        (then the writes commit with the caller's): in a savepoint, or with
        ``savepoint=False`` in the caller's transaction itself, which a failure
        then marks for rollback (see :meth:`Storage.apply`). Every
        operation sees the same ``now``. An object that is not a storage operation
        raises ``TypeError`` and, like any other failure, leaves nothing written.

        * ``Set`` replaces the entry (value, expiry; the counter is cleared).
        * ``Delete`` removes the key; an absent key is fine.
        * ``Expire`` sets the expiry of a live key; an absent or expired key stays absent.
        * ``Increment`` adds ``by`` to the counter, creating a never-expiring row with
          no value and counter 0 first (an expired row counts as absent).
        * ``RangeAdd`` adds a member; a live member keeps its cursor and takes the new
          expiry (none without ``ttl_seconds``); an expired one is replaced by a new
          member at the end of the range.
        * ``RangeRemove`` removes one member, ``RangeClear`` all of them, and
          ``RangeExpire`` sets the expiry of every live member.

        Consecutive ``Set`` operations are written by one statement, and so are
        consecutive ``Delete`` operations (a job batch's records cost one round
        trip, not one per job), two or more consecutive ``RangeAdd`` operations
        (a fan-in child's edges) and two or more consecutive ``Increment`` operations
        (a child's holds on its parents); the effect is that of applying them in order.
        """
        if not operations:
            return
        for operation in operations:
            check_operation(operation)
        now = now_ms()
        steps = list(batch_runs(operations))
        # A run of Sets writes through execute_rows' own cursor: a batch of records
        # alone (every enqueue's) needs no other.
        needs_cursor = any([not isinstance(step, SetRun) for step in steps])
        with (
            self._driver.atomic(savepoint=savepoint),
            self._driver.cursor() if needs_cursor else nullcontext() as cursor,
        ):
            for step in steps:
                self._apply_one(cursor, step, now)

    def _apply_one(
        self,
        cursor: Any,
        operation: StorageOperation | SetRun | DeleteRun | RangeAddRun | IncrementRun,
        now: int,
    ) -> None:
        """One operation (or run of Sets or Deletes) of ``apply`` on ``cursor``."""
        q = self._q
        match operation:
            case SetRun(sets):
                self._driver.execute_rows(q.set_many, set_rows(sets, now), {"now": now})
            case DeleteRun(keys):
                cursor.execute(q.delete_many, {"keys": self._driver.list_param(keys)})
            case Expire(key, ttl_seconds):
                expire = expire_at_ms(now, ttl_seconds)
                cursor.execute(q.expire, {"date_expire": expire, "key": key, "now": now})
            case Increment(key, by):
                cursor.execute(q.increment, {"key": key, "by": by, "now": now})
            case IncrementRun(rows):
                self._driver.execute_rows(q.increment_many, rows, {"now": now})
            case RangeAddRun(adds):
                self._range_add_run(cursor, adds, now)
            case RangeAdd(key, value, ttl_seconds):
                member = {"key": key, "value": value, "now": now}
                member["date_expire"] = expire_at_ms(now, ttl_seconds)
                cursor.execute(q.range_add, member)
                if cursor.fetchone() is None:
                    cursor.execute(q.range_remove_expired_member, member)
                    cursor.execute(q.range_insert, member)
            case RangeRemove(key, value):
                cursor.execute(q.range_remove, {"key": key, "value": value})
            case RangeClear(key):
                cursor.execute(q.range_clear, {"key": key})
            case RangeExpire(key, ttl_seconds):
                expire = expire_at_ms(now, ttl_seconds)
                cursor.execute(q.range_expire, {"date_expire": expire, "key": key, "now": now})
            case _:
                raise TypeError(
                    f"apply() got {operation!r}, which is not a storage operation "
                    f"(one of {_OPERATION_NAMES})"
                )

    def _range_add_run(self, cursor: Any, adds: list[RangeAdd], now: int) -> None:
        """``RangeAdd`` of every member of ``adds`` (distinct members) in one statement:
        new members inserted in order, live ones take their new expiry; an expired
        member (the statement leaves it) is replaced one by one, as ``RangeAdd`` does."""
        rows = [
            {"key": op.key, "value": op.value, "date_expire": expire_at_ms(now, op.ttl_seconds)}
            for op in adds
        ]
        written = {
            (key, as_bytes(value))
            for key, value in self._driver.execute_rows(
                self._q.range_add_many, rows, {"now": now}, returning=True
            )
        }
        for row in rows:
            if (row["key"], row["value"]) not in written:
                member = {**row, "now": now}
                cursor.execute(self._q.range_remove_expired_member, member)
                cursor.execute(self._q.range_insert, member)

    # --- parts of a combined write (storage.batch, PostgreSQL) ---

    def set_many_part(self, sets: Sequence[Set], now: int) -> tuple[str, dict[str, Any]]:
        """The statement and parameters that upsert ``sets`` (distinct keys)."""
        return self._driver.rows_part(self._q.set_many, set_rows(sets, now), {"now": now})

    def increment_many_part(
        self, increments: Sequence[Increment], now: int
    ) -> tuple[str, dict[str, Any]]:
        """The statement and parameters that add to the counters of ``increments``
        (amounts summed per key, keys in order, so writers lock rows in one order)."""
        amounts: dict[str, int] = {}
        for increment in increments:
            amounts[increment.key] = amounts.get(increment.key, 0) + increment.by
        rows = [{"key": key, "by": amounts[key]} for key in sorted(amounts)]
        return self._driver.rows_part(self._q.increment_many, rows, {"now": now})

    def delete_many_part(self, keys: Sequence[str]) -> tuple[str, dict[str, Any]]:
        """The statement and parameters that delete ``keys``."""
        return self._q.delete_many, {"keys": self._driver.list_param(sorted(set(keys)))}

    def range_clear_many_part(self, range_keys: Sequence[str]) -> tuple[str, dict[str, Any]]:
        """The statement and parameters that empty the ranges ``range_keys``."""
        keys = self._driver.list_param(sorted(set(range_keys)))
        return self._q.range_clear_many, {"keys": keys}

    def range_page(
        self,
        key: str,
        cursor: int | None = None,
        limit: int = 100,
        order: RangeOrder = RangeOrder.OLDEST_FIRST,
    ) -> RangePage:
        """At most ``limit`` unexpired members of range ``key`` in ``order``.

        ``cursor`` is exclusive (the ``cursor`` of the last item of the previous
        page); a page costs an index walk of the page, however long the range.
        Members keep their cursor for life, so members added during a walk appear
        after it (oldest first) or not at all (newest first) and never shift a
        page. ``next_cursor`` is ``None`` when the page holds fewer than ``limit``
        items. ``limit`` must be a positive integer (``ValueError`` otherwise).
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        if order is RangeOrder.OLDEST_FIRST:
            sql, start = self._q.range_page_oldest_first, OLDEST_FIRST_START
        elif order is RangeOrder.NEWEST_FIRST:
            sql, start = self._q.range_page_newest_first, NEWEST_FIRST_START
        else:
            raise ValueError(f"order must be a RangeOrder, got {order!r}")
        rows = self._driver.fetch_all(
            sql,
            {
                "key": key,
                "cursor": start if cursor is None else cursor,
                "now": now_ms(),
                "limit": limit,
            },
        )
        items = [RangeItem(cursor=sequence, value=as_bytes(value)) for sequence, value in rows]
        next_cursor = items[-1].cursor if len(items) == limit else None
        return RangePage(items=items, next_cursor=next_cursor)

    def range_members_many(self, keys: Sequence[str]) -> dict[str, list[bytes]]:
        """The unexpired members of each range in ``keys``, oldest first, in one
        statement; ranges with no live member are left out."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        params = {"keys": self._driver.list_param(keys), "now": now_ms()}
        return members_by_range(self._driver.fetch_all(self._q.range_members_many, params))

    def key_scan(self, start: str, stop: str, limit: int) -> list[str]:
        """Up to ``limit`` live keys ``k`` with ``start <= k < stop``, in byte order.

        One walk of the primary key: its cost follows the keys returned, not the
        keys that lie beyond ``stop``. Keys that embed a zero-padded number sort
        by it, which is how the engine keeps a schedule of due times.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        params = {"start": start, "stop": stop, "now": now_ms(), "limit": limit}
        rows = self._driver.fetch_all(self._q.key_scan, params)
        return [key for (key,) in rows]

    def key_scan_reverse(self, start: str, stop: str, limit: int) -> list[str]:
        """Up to ``limit`` live keys ``k`` with ``start <= k < stop``, largest first:
        :meth:`key_scan`'s walk of the primary key, backwards (a newest-first page of
        keys that embed a ULID or a zero-padded time)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        params = {"start": start, "stop": stop, "now": now_ms(), "limit": limit}
        rows = self._driver.fetch_all(self._q.key_scan_reverse, params)
        return [key for (key,) in rows]

    def counter_scan(self, start: str, stop: str, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` live counter rows ``(key, counter_value)`` with ``start <= key
        < stop``, in byte order (rows without a counter are left out): one walk of the
        primary key, as :meth:`key_scan`."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        params = {"start": start, "stop": stop, "now": now_ms(), "limit": limit}
        rows = self._driver.fetch_all(self._q.counter_scan, params)
        return [(key, int(value)) for key, value in rows]

    def range_count(self, key: str) -> int:
        """The number of unexpired members of range ``key``: a plain read that never
        takes the write lock (expired members are left to the sweep)."""
        row = self._driver.fetch_one(self._q.range_count, {"key": key, "now": now_ms()})
        return int(row[0]) if row else 0

    def replace_if(
        self, key: str, expected: bytes, value: bytes, ttl_seconds: float | None = None
    ) -> bool:
        """Replaces the live value of ``key`` by ``value`` (expiring after ``ttl_seconds``,
        or never) only while it is ``expected``; ``True`` if this call replaced it.

        One statement: of concurrent callers expecting the same value exactly one
        gets ``True`` (the others wait for its row lock, then see the new value). An
        absent or expired key is not created (see :meth:`set_if_absent`)."""
        now = now_ms()
        params = {
            "key": key,
            "expected": expected,
            "value": value,
            "now": now,
            "date_expire": expire_at_ms(now, ttl_seconds),
        }
        return self._driver.fetch_one(self._q.replace_if, params) is not None

    def read_ranges_decrementing(
        self, keys: Sequence[str], mark: bytes, prefix: str, suffix: str
    ) -> tuple[dict[str, list[bytes]], dict[str, int]]:
        """The live members of the ranges ``keys`` (as :meth:`range_members_many`), the
        ranges that held any emptied, and, for each member that starts with ``mark``,
        the counter ``prefix + <the member's rest> + suffix`` lowered by the number of
        ranges naming it (as :meth:`decrement_counters`, whose answer is the second
        value: the counters as left, absent ones left out). PostgreSQL: one statement
        (rows locked in key order), and a second that deletes the ranges' rows by
        their sequence when it found any: a finish whose jobs have no children pays
        one. SQLite: a read, then a delete and the decrement only where members were
        found. Call it inside ``atomic()``."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}, {}
        statement = self._q.read_ranges_decrementing
        if statement is None:
            ranges = self.range_members_many(keys)
            amounts: dict[str, int] = {}
            for range_members in ranges.values():
                for member in range_members:
                    if member.startswith(mark):
                        key = prefix + member[len(mark) :].decode() + suffix
                        amounts[key] = amounts.get(key, 0) + 1
            if not ranges:
                return {}, {}
            return ranges, self.decrement_counters(amounts, clear_ranges=list(ranges))
        params = {
            "keys": self._driver.list_param(keys),
            "now": now_ms(),
            "prefix": prefix,
            "suffix": suffix,
            "mark": mark,
            "mark_length": len(mark),
            "skip": len(mark) + 1,
        }
        rows: list[tuple[str, Any]] = []
        left: dict[str, int] = {}
        sequences: dict[str, list[int]] = {}
        for kind, key, value, sequence, counter in self._driver.fetch_all(statement, params):
            if kind == 1:
                left[key] = int(counter)
                continue
            sequences.setdefault(key, []).append(int(sequence))
            if kind == 0:
                rows.append((key, value))
        members = members_by_range(rows)
        # The ranges that held a live member, emptied (expired members with them).
        emptied = [sequence for key in members for sequence in sequences[key]]
        if emptied:
            # A vendor with the combined read has its delete (queries/kv.py's contract).
            delete = self._q.range_rows_delete
            assert delete is not None, "read_ranges_decrementing without range_rows_delete"
            self._driver.execute(delete, {"sequences": self._driver.list_param(emptied)})
        return members, left

    def decrement_counters(
        self, amounts: Mapping[str, int], *, clear_ranges: Sequence[str] = ()
    ) -> dict[str, int]:
        """Subtracts ``amounts[key]`` from the counter of each existing counter row,
        returning the counters as left; absent keys (and rows without a counter) are
        left out and not created. Also empties the ranges ``clear_ranges`` (a
        finishing parent's children ranges: on PostgreSQL in the same statement, so
        the decrement is a finish's last round trip before its commit).

        One statement per distinct amount (a fan-in's finish: one). On PostgreSQL
        the rows are locked in key order (``FOR UPDATE``) before they change, so two
        transactions decrementing the same keys never wait on each other in a
        circle, and of concurrent callers each sees the value its own decrement
        left. Call it inside ``atomic()``: the row locks last until it ends."""
        by_amount: dict[int, list[str]] = {}
        for key, amount in amounts.items():
            by_amount.setdefault(amount, []).append(key)
        ranges = sorted(set(clear_ranges))
        if ranges and not self._driver.combines_statements:
            self._driver.execute(
                self._q.range_clear_many, {"keys": self._driver.list_param(ranges)}
            )
            ranges = []
        left: dict[str, int] = {}
        now = now_ms()
        for amount, keys in sorted(by_amount.items()):
            params = {
                "keys": self._driver.list_param(sorted(keys)),
                "by": amount,
                "now": now,
                "ranges": self._driver.list_param(ranges),
            }
            ranges = []
            for key, counter in self._driver.fetch_all(self._q.decrement_many, params):
                left[key] = int(counter)
        return left

    def set_if_absent(self, key: str, value: bytes, ttl_seconds: float | None = None) -> bool:
        """Creates ``key`` with ``value`` only if it has no unexpired value; ``True`` if
        this call created it (an existing live value is left untouched).

        One statement (``INSERT ... ON CONFLICT DO UPDATE ... WHERE expired ...
        RETURNING``), so of any number of concurrent callers for one key exactly
        one gets ``True``. An expired value counts as absent and is replaced. With
        ``ttl_seconds`` the created value expires, which makes this a lease that
        can be taken again once it lapses.
        """
        now = now_ms()
        params = {"key": key, "value": value, "now": now}
        row = self._driver.fetch_one(
            self._q.set_if_absent, {**params, "date_expire": expire_at_ms(now, ttl_seconds)}
        )
        return row is not None
