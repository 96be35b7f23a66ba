"""Cancel requests: the part of a cancel that a worker carries out.

An operator's cancel (:func:`later_django.engine.job_actions.one_job.cancel_job`) writes a
job ``cancelled`` at once when no worker can hold it. When one may (the job is
running, its delivery message is claimed at that instant, or it is on a topic
partition, whose order only the partition's owner may change), it writes a
*request* instead: the key ``<ns>-cancel-<id>``, whose value names the job's
partition (JSON ``[topic, partition]``) or is empty, expiring after
:data:`REQUEST_SECONDS`.

Workers read the namespace's requests every :data:`POLL_SECONDS`
(:func:`read_requests`: one key scan, and one read of the values when some name
a partition). The worker running the job sets the job's :class:`CancelFlag`
(``context.cancelled``; :func:`check_cancelled` raises ``JobCancelled``), and
whatever the task then does, its outcome is written ``cancelled``. A worker
that claims a requested job starts nothing: it writes it cancelled. The worker
holding a requested job's partition cancels it there (:func:`cancel_on_partitions`,
under the partition fence), which frees the partition. The request key is
deleted with the outcome.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import transaction

from later_django.conf import LaterSettings
from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import (
    cancel_request_bounds,
    cancel_request_key,
    job_id_of_cancel_request_key,
)
from later_django.core.records import JobRecord
from later_django.engine import moves
from later_django.engine.continuations import commit_releasing_children
from later_django.engine.record_reads import read_records
from later_django.engine.writes import JobWrites
from later_django.exceptions import JobCancelled
from later_django.storage.partitions import Partition
from later_django.storage.stores import Stores
from later_django.storage.types import Delete, Set

logger = logging.getLogger("later_django.engine")

#: How often a worker reads the cancel requests: a request reaches its job within this.
POLL_SECONDS = 0.5
#: How long a request is kept: far longer than any lease, so a worker that claims
#: the job after its holder died still finds it.
REQUEST_SECONDS = 3_600
#: Requests read per poll; beyond it, workers read the requests of the jobs they
#: hold by key (see :class:`Requests`).
POLL_LIMIT = 1_000
#: The reason recorded when a cancel request is carried out.
REASON = "cancelled by request"


class CancelFlag(threading.Event):
    """``context.cancelled``: set once the job's cancel was requested. ``is_set()``,
    ``wait(timeout)`` as on any ``threading.Event``; ``bool(flag)`` is ``is_set()``."""

    def __bool__(self) -> bool:
        return self.is_set()


_running: contextvars.ContextVar[CancelFlag | None] = contextvars.ContextVar(
    "later_running_job_flag", default=None
)


@contextmanager
def running_with(flag: CancelFlag) -> Iterator[None]:
    """While a job's task runs on this thread: its flag, for :func:`check_cancelled`."""
    token = _running.set(flag)
    try:
        yield
    finally:
        _running.reset(token)


def check_cancelled() -> None:
    """Raises ``JobCancelled`` inside a task whose cancel was requested; does nothing
    elsewhere (outside a worker's task, or not requested)."""
    flag = _running.get()
    if flag is not None and flag.is_set():
        raise JobCancelled("the job's cancel was requested")


def request(record: JobRecord) -> Set:
    """The write that asks the worker side to cancel ``record``'s job."""
    value = b""
    if record.topic is not None:
        value = json.dumps([record.topic, record.partition_id]).encode()
    return Set(cancel_request_key(record.namespace, record.job_id), value, REQUEST_SECONDS)


def forget(namespace: str, job_id: str) -> Delete:
    """The write that removes ``job_id``'s request (with its outcome)."""
    return Delete(cancel_request_key(namespace, job_id))


@dataclass(frozen=True)
class Requests:
    """The cancel requests of a namespace as one poll found them: job id -> the
    job's partition or None. ``complete`` is False when the poll hit its limit:
    then a job not listed may still be requested (read those by key:
    :func:`requested_among`)."""

    jobs: Mapping[str, Partition | None]
    complete: bool = True

    def __contains__(self, job_id: object) -> bool:
        return job_id in self.jobs


NONE = Requests({})


def read_requests(stores: Stores, namespace: str, limit: int = POLL_LIMIT) -> Requests:
    """The namespace's cancel requests, at most ``limit``: one key scan, then one read
    of the values when there are any (a request's value names its partition)."""
    start, stop = cancel_request_bounds(namespace)
    keys = stores.kv.key_scan(start, stop, limit + 1)
    if not keys:
        return NONE
    complete = len(keys) <= limit
    keys = keys[:limit]
    values = stores.kv.get_many(keys)
    jobs: dict[str, Partition | None] = {}
    for key in keys:
        jobs[job_id_of_cancel_request_key(namespace, key)] = _partition(values.get(key))
    return Requests(jobs, complete)


def requested_among(stores: Stores, namespace: str, job_ids: Sequence[str]) -> set[str]:
    """Which of ``job_ids`` have a cancel request, read by key (one statement)."""
    if not job_ids:
        return set()
    keys = {cancel_request_key(namespace, job_id): job_id for job_id in job_ids}
    return {keys[key] for key in stores.kv.get_many(list(keys))}


def _partition(value: bytes | None) -> Partition | None:
    if not value:
        return None
    try:
        topic, partition_id = json.loads(value)
        return (str(topic), int(partition_id))
    except (ValueError, TypeError):
        return None


def cancel_on_partitions(
    job_ids: Sequence[str],
    held: Mapping[Partition, int],
    *,
    stores: Stores,
    namespace: str,
    worker_id: str,
    lease_ms: int,
    settings: LaterSettings,
) -> list[JobRecord]:
    """Cancels the requested jobs ``job_ids`` that wait on partitions this worker holds
    (``held``: partition -> epoch), none of them running here. One transaction,
    opened by the partition fence (a partition taken over meanwhile is left to
    its new owner); each record read under a row lock; a live job that is not
    running is written ``cancelled`` and leaves its partition (the next row may
    become its head), and its request is forgotten. A running one (another
    worker's attempt, lost with its lease) is left for the next start of the head.
    Returns the records written cancelled."""
    if not job_ids or not held:
        return []
    with transaction.atomic(using=stores.using, savepoint=False):
        kept = stores.partitions.fence(
            namespace,
            worker_id,
            {(topic, partition_id, epoch) for (topic, partition_id), epoch in held.items()},
            now_ms() + lease_ms,
        )
        records = read_records(stores.kv, namespace, job_ids, for_update=True)
        writes = JobWrites(namespace)
        now = now_ms()
        cancelled: list[JobRecord] = []
        for job_id in job_ids:
            record = records.get(job_id)
            if record is None or record.stage in stages.FINISHED:
                writes.add(forget(namespace, job_id))
                continue
            partition = (record.topic, record.partition_id)
            if record.topic is None or partition not in kept or record.stage == stages.RUNNING:
                continue
            moves.cancel(writes, record, now, REASON, settings)
            writes.add(forget(namespace, job_id))
            cancelled.append(record)
        commit_releasing_children(writes, stores, settings)
    for record in cancelled:
        logger.info(
            "job %s cancelled on topic %r partition %s",
            record.job_id,
            record.topic,
            record.partition_id,
        )
    return cancelled
