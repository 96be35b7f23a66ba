"""Promotion of due delayed and requeued jobs into the delivery queue.

The schedule is a set of ``<ns>-due-<time>-<id>`` keys in ``later_storage``
(see :mod:`later_django.core.records`). A pass walks the primary key from the
namespace's first entry up to ``now``, so its cost follows the number of due
jobs, however many are scheduled for later.
"""

from __future__ import annotations

from django.db import transaction

from later_django.core import stages
from later_django.core.clock import now_ms
from later_django.core.keys import due_scan_bounds, job_id_of_due_key
from later_django.engine import moves
from later_django.engine.record_reads import read_records
from later_django.engine.writes import JobWrites, commit
from later_django.storage.stores import Stores
from later_django.storage.types import Delete

#: Entries promoted per transaction; a pass loops until fewer come back.
PROMOTION_BATCH = 500


def promote_due(
    *, stores: Stores, namespace: str, limit: int = PROMOTION_BATCH, due_by_ms: int | None = None
) -> int:
    """Moves up to ``limit`` jobs due by ``due_by_ms`` (default: now) to ``enqueued``
    in one transaction; returns how many schedule entries it consumed (entries
    whose job is gone or no longer delayed/requeued are just removed). The moves
    are dated now whatever ``due_by_ms`` is; the jobs are published in due order,
    so among equal priorities the one due first is claimed first."""
    now = now_ms()
    start, stop = due_scan_bounds(namespace, now if due_by_ms is None else due_by_ms)
    with transaction.atomic(using=stores.using):
        keys = stores.kv.key_scan(start, stop, limit)
        if not keys:
            return 0
        records = read_records(
            stores.kv, namespace, [job_id_of_due_key(key) for key in keys], for_update=True
        )
        writes = JobWrites(namespace)
        for key in keys:
            writes.add(Delete(key))
        # Published in due order (the keys' order: due time, then job id), not in
        # the records' (read in key order, which is job id order): a job's queue
        # sequence orders it among its priority, so an earlier ``run_after`` runs
        # first, as Django orders ready tasks (priority, then run_after).
        for key in keys:
            record = records.get(job_id_of_due_key(key))
            if record is not None and record.stage in (stages.DELAYED, stages.REQUEUED):
                moves.make_ready(writes, record, now)
        commit(writes, stores)
    return len(keys)


def promote_all_due(
    *, stores: Stores, namespace: str, limit: int = PROMOTION_BATCH, due_by_ms: int | None = None
) -> int:
    """Runs :func:`promote_due` until a batch comes back short; returns the total."""
    total = 0
    while True:
        promoted = promote_due(stores=stores, namespace=namespace, limit=limit, due_by_ms=due_by_ms)
        total += promoted
        if promoted < limit:
            return total
