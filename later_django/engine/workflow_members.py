"""Jobs joining a workflow as they are enqueued (``engine.batch_scope`` says which)."""

from __future__ import annotations

from collections.abc import Sequence

from later_django.core.keys import workflow_jobs_key
from later_django.core.records import JobRecord
from later_django.engine.writes import JobWrites
from later_django.storage.types import RangeAdd


def join(writes: JobWrites, records: Sequence[JobRecord], workflow_id: str) -> None:
    """``records`` (new, not yet placed) join ``workflow_id``: their records carry it
    and the workflow's jobs range gets them, in ``writes``. Placing them then counts
    them in the workflow's stage counts (``JobWrites.count_transition``)."""
    key = workflow_jobs_key(writes.namespace, workflow_id)
    for record in records:
        record.workflow_id = workflow_id
        writes.add(RangeAdd(key, record.job_id.encode()))
