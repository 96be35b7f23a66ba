"""``tests/copies.py``: a copy of a job is what ``enqueue_many`` writes for a job."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from later_django.api import enqueue_many
from later_django.compat.tasks import TaskResultStatus
from later_django.storage.stores import stores_for
from tests.copies import copy_job, rows_of_job
from tests.engine import tasks
from tests.engine.support import NAMESPACE, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def with_id(rows: list[tuple[str, list[str], list[tuple[Any, ...]]]], old: str, new: str):
    """``rows_of_job``'s answer with ``new`` for ``old``, each table's rows sorted."""

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old, new)
        if isinstance(value, bytes):
            return value.replace(old.encode(), new.encode())
        return value

    return [
        (table, columns, sorted(tuple(swap(value) for value in row) for row in table_rows))
        for table, columns, table_rows in rows
    ]


@pytest.mark.parametrize("stage", ["enqueued", "delayed"])
def test_a_copy_has_the_rows_enqueue_many_writes_for_a_job_of_the_same_call(
    engine_db: str, stage: str
) -> None:
    task = tasks.add
    if stage == "delayed":
        task = task.using(run_after=timezone.now() + timedelta(days=1))
    # Two jobs of one call, alike but for their ids: the second is what enqueue_many
    # writes for a job like the first.
    first, second = enqueue_many(task, [((1, 2), {}), ((1, 2), {})], ids_only=True)
    copies = copy_job(engine_db, first, 2)

    expected = with_id(rows_of_job(engine_db, second), second, "<id>")
    # The record and the schedule key, the index row; or the record and the message.
    assert [table for table, _, _ in expected] == (
        ["later_jobs_index", "later_storage"]
        if stage == "delayed"
        else ["later_delivery_queue", "later_storage"]
    )
    for copy in copies:
        assert with_id(rows_of_job(engine_db, copy), copy, "<id>") == expected
    assert copies == sorted(copies) and len(set(copies) | {first, second}) == 4
    # The counters, kept by the tables' triggers, count the copies.
    assert stores_for(engine_db).index.job_index_stage_counts(NAMESPACE) == {stage: 4}
    if stage == "enqueued":
        assert stores_for(engine_db).queue.depth(NAMESPACE) == 4
        results = run_until_finished(copies)
        assert [(found.status, found.return_value) for found in results] == [
            (TaskResultStatus.SUCCESSFUL, 3)
        ] * 2
