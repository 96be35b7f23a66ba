"""The scheduling pass of recurring jobs: every due tick enqueued exactly once.

:func:`run_recurring_pass` reads the due part of the schedule index
(``<ns>-recurdue-<ms>-<id>`` keys up to now) in pages of ``BATCH`` keys. Each
page is one transaction: the definitions are read with a row lock (in key
order, so concurrent passes cannot deadlock), re-checked (still due at
``now``?), their occurrences are written with one ``write_jobs`` per backend
(one statement per table), and the definitions are written back with their
next run advanced. A second process running the pass at the same time waits
for the locks, then finds the definitions no longer due.

If a page fails for a reason other than the database (say, a topic whose
stored layout changed), its definitions are retried one per transaction, so
one bad definition is logged and skipped while the others run.

Registered as the maintenance pass ``recurring`` (every second) in
:mod:`later_django.maintenance.passes`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from croniter import CroniterError
from django.db import DatabaseError, transaction

from later_django.compat.tasks import InvalidTask, Task
from later_django.core import clock
from later_django.core.keys import (
    parse_recurring_due_key,
    recurring_due_bounds,
    recurring_due_key,
    recurring_key,
)
from later_django.core.topics import RECURRING_TOPIC
from later_django.engine.enqueue import JobBackend, NewJob
from later_django.engine.recurring import (
    RecurringDefinition,
    decode_definition,
    key_pages,
    write_operations,
)
from later_django.engine.recurring_schedule import last_tick_ms, next_tick_ms
from later_django.engine.registry import resolve_task
from later_django.exceptions import RecordDecodeError, UnregisteredTaskError
from later_django.storage.stores import Stores, stores_for
from later_django.storage.types import Delete, StorageOperation

logger = logging.getLogger("later_django.recurring")

#: A tick the pass reaches at most this late is on time and gets its own
#: occurrence; older ticks were missed (downtime) and share one catch-up run.
MISFIRE_GRACE_MS = 5_000
#: The next run of a schedule that has no tick left (the largest 15-digit time).
NEVER_MS = 10**15 - 1
#: Due definitions handled per transaction.
BATCH = 100


def due_ticks(definition: RecurringDefinition, now: int) -> tuple[list[int], int]:
    """The ticks to enqueue for ``definition`` at ``now`` and the next run after them.

    Ticks at most ``MISFIRE_GRACE_MS`` old are on time: each gets its occurrence
    (a pass that runs a little late loses none). Older ticks were missed (nothing
    ran the pass: downtime) and all of them together get ONE catch-up occurrence,
    for the latest missed tick. The next run is the first tick after ``now``.
    Raises ``CroniterError`` when the schedule has no tick left.
    """
    cron, timezone = definition.cron, definition.timezone
    ticks: list[int] = []
    first = definition.next_run_ms
    if first > now:
        return ticks, first
    horizon = now - MISFIRE_GRACE_MS
    if first < horizon:
        ticks.append(last_tick_ms(cron, timezone, horizon - 1))
        tick = next_tick_ms(cron, timezone, horizon - 1)
    else:
        tick = first
    while tick <= now:
        ticks.append(tick)
        tick = next_tick_ms(cron, timezone, tick)
    return ticks, tick


def run_recurring_pass(
    stores: Stores, namespace: str, now_ms: int, *, deadline: float | None = None
) -> int:
    """Enqueues the occurrences of every definition due at ``now_ms``; returns how many.

    ``deadline`` (a ``time.monotonic()`` value) bounds the pass: it stops after
    the page it is in, leaving the rest due for the next run.
    """
    start, stop = recurring_due_bounds(namespace, now_ms)
    enqueued = 0
    for keys in key_pages(stores.kv, start, stop, BATCH):
        due = [parse_recurring_due_key(namespace, key) for key in keys]
        enqueued += _run_page(stores, namespace, due, now_ms)
        if deadline is not None and time.monotonic() > deadline:
            break
    return enqueued


def _run_page(stores: Stores, namespace: str, due: list[tuple[int, str]], now: int) -> int:
    """One page in one transaction; on a failure that is not the database's, each of
    its definitions again in its own transaction (a lone failure is logged)."""
    try:
        return _run_batch(stores, namespace, due, now)
    except DatabaseError:
        raise
    except Exception:
        if len(due) == 1:
            logger.exception("recurring job %r: its due occurrence failed", due[0][1])
            return 0
        logger.warning("a page of recurring jobs failed; retrying them one by one", exc_info=True)
        return sum(_run_page(stores, namespace, [item], now) for item in due)


@dataclass
class _Batch:
    """The writes of one page: storage operations and the new jobs per backend."""

    operations: list[StorageOperation] = field(default_factory=list)
    #: backend alias → (backend, tasks, jobs, the definition of each job)
    jobs: dict[str, tuple[JobBackend, list[Task], list[NewJob], list[str]]] = field(
        default_factory=dict
    )
    #: definitions that get occurrences, with their ticks and next run
    runs: list[tuple[RecurringDefinition, list[int], int]] = field(default_factory=list)


def _run_batch(stores: Stores, namespace: str, due: list[tuple[int, str]], now: int) -> int:
    batch = _Batch()
    with transaction.atomic(using=stores.using):
        keys = sorted({recurring_key(namespace, recurring_id) for _, recurring_id in due})
        found = stores.kv.get_many_for_update(keys)
        for due_ms, recurring_id in due:
            _plan(
                batch,
                namespace,
                found.get(recurring_key(namespace, recurring_id)),
                due_ms,
                recurring_id,
                now,
            )
        enqueued_ids: dict[str, list[str]] = {}
        for backend, tasks, jobs, owners in batch.jobs.values():
            results = backend.write_jobs(tasks, jobs)
            for owner, result in zip(owners, results, strict=True):
                enqueued_ids.setdefault(owner, []).append(result.id)
        for definition, ticks, next_run in batch.runs:
            job_ids = enqueued_ids[definition.id]
            updated = replace(
                definition,
                next_run_ms=next_run,
                last_run_ms=ticks[-1],
                last_job_id=job_ids[-1],
                last_error=None,
                recent_job_ids=definition.with_runs(job_ids),
            )
            batch.operations.extend(write_operations(namespace, definition, updated))
        if batch.operations:
            stores.kv.apply(batch.operations, savepoint=False)
    enqueued = sum(len(ticks) for _, ticks, _ in batch.runs)
    if enqueued:
        logger.debug(
            "%d occurrence(s) of %d recurring job(s) enqueued: %s",
            enqueued,
            len(batch.runs),
            ", ".join(definition.id for definition, _, _ in batch.runs),
        )
    return enqueued


def _plan(
    batch: _Batch,
    namespace: str,
    raw: bytes | None,
    due_ms: int,
    recurring_id: str,
    now: int,
) -> None:
    """Adds what the due index key ``(due_ms, recurring_id)`` needs to ``batch``."""
    if raw is None:  # the definition is gone: drop its stale index key
        batch.operations.append(Delete(recurring_due_key(namespace, due_ms, recurring_id)))
        return
    try:
        definition = decode_definition(raw)
    except RecordDecodeError as error:
        logger.error("recurring job %r cannot be decoded, skipped: %s", recurring_id, error)
        return
    if not definition.enabled or definition.next_run_ms != due_ms:
        # Moved on (another pass, a replace) or disabled meanwhile: a stale key.
        batch.operations.append(Delete(recurring_due_key(namespace, due_ms, recurring_id)))
        return
    try:
        ticks, next_run = due_ticks(definition, now)
    except CroniterError as error:  # e.g. a year field whose last year has passed
        logger.error("recurring job %r has no tick left, stopped: %s", recurring_id, error)
        stopped = replace(definition, next_run_ms=NEVER_MS, last_error=f"no tick left: {error}")
        batch.operations.extend(write_operations(namespace, definition, stopped))
        return
    if not ticks:
        return
    try:
        task, backend, jobs = _occurrences(definition, ticks)
    except (UnregisteredTaskError, InvalidTask, TypeError, ValueError) as error:
        logger.error(
            "recurring job %r: tick skipped, its task cannot be enqueued: %s", recurring_id, error
        )
        skipped = replace(definition, next_run_ms=next_run, last_error=str(error))
        batch.operations.extend(write_operations(namespace, definition, skipped))
        return
    _, tasks, new_jobs, owners = batch.jobs.setdefault(backend.alias, (backend, [], [], []))
    tasks.extend([task] * len(jobs))
    new_jobs.extend(jobs)
    owners.extend([definition.id] * len(jobs))
    batch.runs.append((definition, ticks, next_run))


def _occurrences(
    definition: RecurringDefinition, ticks: list[int]
) -> tuple[Task, JobBackend, list[NewJob]]:
    """The task, its backend and one ``NewJob`` per tick (``run_after_ms`` = the tick,
    ``recurring_id`` set; sequential ones in the reserved topic, keyed by the id)."""
    task = resolve_task(definition.task_path)
    backend = task.get_backend()
    if not isinstance(backend, JobBackend):
        raise InvalidTask(
            f"task {definition.task_path} uses backend {task.backend!r}, not a LaterBackend"
        )
    base = backend.new_job(task, definition.args, definition.kwargs)
    routing: dict[str, Any] = {"recurring_id": definition.id}
    if definition.sequential:
        routing.update(topic=RECURRING_TOPIC, partition_key=definition.id)
    return task, backend, [replace(base, run_after_ms=tick, **routing) for tick in ticks]


def run_occurrence_now(
    stores: Stores, namespace: str, recurring_id: str, now: int | None = None
) -> str:
    """Enqueues one occurrence of the definition now, outside its schedule, and
    returns its job id; one transaction (the caller's inside ``atomic()``).

    The next and last scheduled runs stay as they are; the occurrence is remembered
    as the last job and among the recent ones. A sequential definition's occurrence
    queues behind the running one in its partition, as a tick's would; a disabled
    definition runs too (an operator asked for it). Raises ``LookupError`` when
    there is no such definition, and what the enqueue raises when its task cannot be
    enqueued (``UnregisteredTaskError``, ``InvalidTask``), writing nothing."""
    now = clock.now_ms() if now is None else now
    key = recurring_key(namespace, recurring_id)
    with transaction.atomic(using=stores.using):
        raw = stores.kv.get_many_for_update([key]).get(key)
        if raw is None:
            raise LookupError(f"there is no recurring job {recurring_id!r}")
        definition = decode_definition(raw)
        task, backend, jobs = _occurrences(definition, [now])
        (result,) = backend.write_jobs([task], jobs)
        updated = replace(
            definition, last_job_id=result.id, recent_job_ids=definition.with_runs([result.id])
        )
        stores.kv.apply(write_operations(namespace, definition, updated), savepoint=False)
    return str(result.id)


def recurring_pass(context: Any) -> int:
    """The maintenance pass ``recurring``: one bounded run at the current time."""
    return run_recurring_pass(
        stores_for(context.using), context.namespace, clock.now_ms(), deadline=context.deadline
    )


def recurring_wanted(context: Any) -> bool:
    """A read of one index key: is any recurring definition due now?"""
    start, stop = recurring_due_bounds(context.namespace, clock.now_ms())
    return bool(stores_for(context.using).kv.key_scan(start, stop, 1))
