"""The job record: what ``later_storage`` holds for one job, as MessagePack.

A record is a map with short, stable keys (``v`` is the format version). It
holds only JSON-compatible values plus integers for times (epoch ms), so it can
be decoded without executing anything; decoding a malformed record raises
:class:`~later_django.exceptions.RecordDecodeError`.

Its keys in ``later_storage`` are spelled in :mod:`later_django.core.keys`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack

from later_django.core.keys import job_key
from later_django.exceptions import RecordDecodeError

RECORD_FORMAT_VERSION = 1

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
#: Two characters of Crockford base 32 for each 10-bit value.
_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]
_RANDOM_BITS = 80
_MAX_RANDOM = (1 << _RANDOM_BITS) - 1


class _UlidState:
    """The millisecond and the randomness of the last ULID this process made."""

    lock = threading.Lock()
    ms = -1
    random = 0


def _forget_last_ulid() -> None:
    """In a forked child: a new millisecond's ids start from fresh randomness, so the
    child never continues the parent's sequence (the same ids in the same millisecond)."""
    _UlidState.lock = threading.Lock()
    _UlidState.ms = -1


os.register_at_fork(after_in_child=_forget_last_ulid)


def _base32(value: int, pairs: int) -> str:
    """The low ``pairs`` * 10 bits of ``value`` as ``2 * pairs`` characters of
    Crockford base 32."""
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in range(10 * pairs - 10, -1, -10)])


def new_job_id() -> str:
    """A new ULID as 26 characters of Crockford base 32: unique and time sortable."""
    return new_job_ids(1)[0]


def new_job_ids(count: int) -> list[str]:
    """``count`` new ULIDs (see :func:`new_job_id`), ascending: the same as ``count``
    calls of ``str(ulid.ULID())`` in one millisecond, as python-ulid's monotonic rule
    makes them. The first of a millisecond has 80 random bits, each next one is the
    previous plus one (so ids made in one millisecond, by one call or several, sort in
    the order they were made). When the randomness would overflow, the ids wait for
    the next millisecond (python-ulid raises instead; the chance is ~count / 2**80)."""
    if count <= 0:
        return []
    state = _UlidState
    with state.lock:
        ms = time.time_ns() // 1_000_000
        if ms == state.ms:
            first = state.random + 1
            while first + count - 1 > _MAX_RANDOM:  # exhausted: the next millisecond
                while ms <= state.ms:
                    ms = time.time_ns() // 1_000_000
                first = int.from_bytes(os.urandom(10), "big")
        else:
            first = int.from_bytes(os.urandom(10), "big")
        while first + count - 1 > _MAX_RANDOM:  # a fresh start too near the top
            first = int.from_bytes(os.urandom(10), "big")
        state.ms, state.random = ms, first + count - 1
    stamp = _base32(ms, 5)  # 48 bits as 10 characters (the first one's top 2 bits are 0)
    ids: list[str] = []
    end = first + count
    while first < end:
        # Ids that differ only in their 10 lowest bits share their first 24 characters.
        head = stamp + _base32(first >> 10, 7)
        stop = min(end, (first | 1023) + 1)
        ids += [head + tail for tail in _PAIRS[first & 1023 : ((stop - 1) & 1023) + 1]]
        first = stop
    return ids


@dataclass
class JobError:
    """One failed attempt: the exception's class path and its formatted traceback."""

    exception_class_path: str
    traceback: str
    at_ms: int
    attempt: int


@dataclass
class JobRecord:
    """A job as stored. ``history`` lists the previous stages as ``(stage, at_ms)``;
    its length is the job's revision."""

    job_id: str
    namespace: str
    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    queue_name: str
    priority: int
    backend: str
    stage: str
    stage_at_ms: int
    created_at_ms: int
    history: list[tuple[str, int]] = field(default_factory=list)
    run_after_ms: int | None = None
    #: When the job last became ready to run (queue wait is measured from here).
    ready_at_ms: int | None = None
    retry: dict[str, Any] | None = None
    parent_job_id: str | None = None
    #: ``success`` or ``finish``: when a continuation runs.
    run_on: str | None = None
    reason: str | None = None
    recurring_id: str | None = None
    topic: str | None = None
    partition_id: int | None = None
    sequence: int | None = None
    return_value: Any = None
    errors: list[JobError] = field(default_factory=list)
    worker_ids: list[str] = field(default_factory=list)
    enqueued_at_ms: int | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    last_attempted_at_ms: int | None = None
    #: The enqueue's trace context (W3C headers the OpenTelemetry propagator wrote),
    #: which the execution span continues; None: not traced (see ``engine.tracing``).
    trace: dict[str, str] | None = None
    #: A fan-in child's parents (``api.after``), all of which it waits for; None for
    #: every other job (a ``continue_with`` child names its one parent in
    #: ``parent_job_id``).
    parent_job_ids: list[str] | None = None
    #: The workflow or batch the job belongs to (``later_django.workflow``,
    #: ``later_django.batches``); None for a job of none.
    workflow_id: str | None = None

    def clone(self) -> JobRecord:
        """A copy whose lists can be changed without touching this record."""
        return replace(
            self,
            history=list(self.history),
            errors=list(self.errors),
            worker_ids=list(self.worker_ids),
        )

    @property
    def revision(self) -> int:
        return len(self.history)

    @property
    def attempts(self) -> int:
        return len(self.worker_ids)

    @property
    def key(self) -> str:
        return job_key(self.namespace, self.job_id)


_FIELDS = {
    "id": "job_id",
    "ns": "namespace",
    "task": "task_path",
    "args": "args",
    "kwargs": "kwargs",
    "queue": "queue_name",
    "prio": "priority",
    "backend": "backend",
    "stage": "stage",
    "stage_at": "stage_at_ms",
    "created": "created_at_ms",
    "run_after": "run_after_ms",
    "ready_at": "ready_at_ms",
    "retry": "retry",
    "parent": "parent_job_id",
    "on": "run_on",
    "reason": "reason",
    "recurring": "recurring_id",
    "topic": "topic",
    "partition": "partition_id",
    "seq": "sequence",
    "ret": "return_value",
    "workers": "worker_ids",
    "enqueued": "enqueued_at_ms",
    "started": "started_at_ms",
    "finished": "finished_at_ms",
    "attempted": "last_attempted_at_ms",
    "trace": "trace",
    "parents": "parent_job_ids",
    "flow": "workflow_id",
}
_FIELD_ITEMS = tuple(_FIELDS.items())
_REQUIRED = ("id", "ns", "task", "args", "kwargs", "queue", "prio", "stage", "stage_at", "created")


_REQUIRED_SET = frozenset(_REQUIRED)


class _Packers(threading.local):
    """A MessagePack packer per thread, made once: ``msgpack.packb`` makes (and
    allocates the buffer of) a new one per call, a third of a record's encoding. A
    packer resets its buffer after each ``pack``, also one that raised."""

    def __init__(self) -> None:
        self.packer = msgpack.Packer(use_bin_type=True)


_packers = _Packers()


def packer_of_thread() -> msgpack.Packer:
    """This thread's packer: ``packer.pack(value)`` is ``msgpack.packb(value,
    use_bin_type=True)`` (for a batch: one attribute lookup, then a call per value)."""
    packer: msgpack.Packer = _packers.packer
    return packer


def pack(value: Any) -> bytes:
    """``msgpack.packb(value, use_bin_type=True)``, on this thread's packer."""
    packed: bytes = _packers.packer.pack(value)
    return packed


def encode_record(record: JobRecord) -> bytes:
    """The MessagePack bytes of ``record``."""
    body: dict[str, Any] = {"v": RECORD_FORMAT_VERSION}
    values = record.__dict__  # a plain dataclass: its fields are its __dict__
    for short, name in _FIELD_ITEMS:
        value = values[name]
        if value is not None or short in _REQUIRED_SET:
            body[short] = value
    history, errors = record.history, record.errors
    body["hist"] = [[stage, at] for stage, at in history] if history else []
    body["errors"] = (
        [
            [error.exception_class_path, error.traceback, error.at_ms, error.attempt]
            for error in errors
        ]
        if errors
        else []
    )
    packed: bytes = _packers.packer.pack(body)
    return packed


#: Record attribute name -> its short name in the stored map.
_SHORT = {name: short for short, name in _FIELDS.items()}


def decode_fields(data: bytes, names: Sequence[str]) -> dict[str, Any]:
    """Only the attributes ``names`` of the record in ``data`` (``None`` for those it
    does not hold), without building the record: a third of :func:`decode_record`'s
    time, for a page that shows a few fields of a thousand jobs.
    ``RecordDecodeError`` when ``data`` is not a record of this format."""
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as error:  # msgpack raises several unrelated types
        detail = str(error) or type(error).__name__
        raise RecordDecodeError(f"job record is not valid MessagePack ({detail})") from error
    if not isinstance(body, dict) or body.get("v") != RECORD_FORMAT_VERSION:
        raise RecordDecodeError("job record is not a map of the known format version")
    return {name: body.get(_SHORT[name]) for name in names}


def decode_record(data: bytes) -> JobRecord:
    """The record in ``data``; ``RecordDecodeError`` says what is wrong with it."""
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as error:  # msgpack raises several unrelated types
        detail = str(error) or type(error).__name__
        raise RecordDecodeError(f"job record is not valid MessagePack ({detail})") from error
    if not isinstance(body, dict):
        raise RecordDecodeError(f"job record must be a map, got {type(body).__name__}")
    if body.get("v") != RECORD_FORMAT_VERSION:
        raise RecordDecodeError(f"job record has unknown format version {body.get('v')!r}")
    missing = [short for short in _REQUIRED if short not in body]
    if missing:
        raise RecordDecodeError(f"job record lacks the fields {missing}")
    try:
        values: dict[str, Any] = {name: body.get(short) for short, name in _FIELDS.items()}
        values["worker_ids"] = list(values["worker_ids"] or [])
        values["backend"] = values["backend"] or "default"
        record = JobRecord(
            **values,
            history=[(str(stage), int(at)) for stage, at in body.get("hist", [])],
            errors=[JobError(str(p), str(t), int(at), int(n)) for p, t, at, n in body["errors"]],
        )
    except (TypeError, ValueError, KeyError) as error:
        raise RecordDecodeError(f"job record has a malformed field: {error}") from error
    if not isinstance(record.args, list) or not isinstance(record.kwargs, dict):
        raise RecordDecodeError("job record args must be a list and kwargs a map")
    return record
