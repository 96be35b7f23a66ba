"""Finished jobs expire by ``LATER["RETENTION"]``; PostgreSQL wakes workers once per transaction."""

from __future__ import annotations

import pytest
from django.db import connections, transaction
from django.test import override_settings

from later_django.compat.tasks import TaskResultDoesNotExist, TaskResultStatus
from later_django.core.clock import now_ms
from later_django.core.keys import job_key
from later_django.storage.postgres.listener import listening_connection
from later_django.storage.queries.queue import WAKE_CHANNEL
from tests.engine import tasks
from tests.engine.support import NAMESPACE, key_column, result, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

RETENTION = {"success": 60, "failed": 120}


def expiry_of(alias: str, job_id: str) -> tuple[int | None, int | None]:
    """The expiry of the job's record (``date_expire_unindexed``: a finished record's
    ``date_expire``, the indexed one, stays empty) and of its index row."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT date_expire, date_expire_unindexed FROM later_storage "
            f"WHERE {key_column(alias)} = %s",
            [job_key(NAMESPACE, job_id)],
        )
        indexed, record = cursor.fetchone()
        assert indexed is None
        cursor.execute(
            "SELECT date_expire FROM later_jobs_index WHERE namespace = %s AND job_id = %s",
            [NAMESPACE, job_id],
        )
        index = cursor.fetchone()[0]
    return record, index


def test_finished_jobs_expire_by_the_retention_of_their_outcome(db_alias: str) -> None:
    later = {"NAMESPACE": NAMESPACE, "DATABASE": db_alias, "RETENTION": RETENTION}
    with override_settings(LATER=later):
        before = now_ms()
        succeeded = tasks.add.enqueue(1, 2)
        failed = tasks.fail_once_without_retry.enqueue("no")
        run_until_finished([succeeded.id, failed.id])
        after = now_ms()

        assert result(succeeded.id).status == TaskResultStatus.SUCCESSFUL
        assert result(failed.id).status == TaskResultStatus.FAILED
        for job, seconds in ((succeeded, 60), (failed, 120)):
            record_expiry, index_expiry = expiry_of(db_alias, job.id)
            assert before + seconds * 1000 <= record_expiry <= after + seconds * 1000
            # Both come from the same retention in one transaction; the storage layer
            # reads its own clock for the record's TTL, so they may differ by a tick.
            assert abs(index_expiry - record_expiry) <= 50

        # Once expired, the job reads as gone (the sweep deletes the rows later).
        with connections[db_alias].cursor() as cursor:
            cursor.execute(
                "UPDATE later_storage SET date_expire_unindexed = %s "
                f"WHERE {key_column(db_alias)} = %s",
                [now_ms() - 1, job_key(NAMESPACE, succeeded.id)],
            )
        with pytest.raises(TaskResultDoesNotExist):
            result(succeeded.id)


def test_a_transaction_that_enqueues_ten_jobs_wakes_listeners_once(postgres_alias: str) -> None:
    with (
        override_settings(LATER={"NAMESPACE": NAMESPACE, "DATABASE": postgres_alias}),
        listening_connection(postgres_alias) as listener,
    ):
        with transaction.atomic(using=postgres_alias):
            for number in range(10):
                tasks.add.enqueue(number, number)
            tasks.add.using(queue_name="emails").enqueue(1, 1)
        with transaction.atomic(using=postgres_alias):
            tasks.add.enqueue(0, 0)
        received = list(listener.notifies(timeout=1.0))

    assert [(note.channel, note.payload) for note in received] == [
        (WAKE_CHANNEL, NAMESPACE),
        (WAKE_CHANNEL, NAMESPACE),
    ], "one notification per committed transaction"
