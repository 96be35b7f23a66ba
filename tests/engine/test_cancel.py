"""Cancelling jobs in one process, on both databases: each live stage that no worker
holds is cancelled at once and never starts; a finished or unknown job is left
alone; continuations of a cancelled parent; a job whose cancel is requested is
cancelled by the worker that meets it at its start; bulk cancel through the API
and ``later_jobs cancel``. Running jobs under real worker processes are in
``tests/worker/test_cancel_workers.py``, jobs on partitions in
``tests/partitions/test_cancel.py``."""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections

from later_django import api
from later_django.compat.tasks import TaskResultStatus
from later_django.conf import later_settings
from later_django.core.keys import cancel_request_key
from later_django.core.records import decode_record
from later_django.engine import cancellation
from later_django.engine.writes import JobWrites, commit
from later_django.exceptions import JobCancelled, class_path
from later_django.overview.snapshot import read_overview
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import key_column, result, run_burst, run_until_finished

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

CANCELLED_PATH = class_path(JobCancelled)


def later_in(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def assert_cancelled(job_id: str) -> None:
    found = result(job_id)
    assert found.status == TaskResultStatus.FAILED
    assert found.errors[-1].exception_class_path == CANCELLED_PATH
    assert stored_stage(job_id) == "cancelled"


def stored_stage(job_id: str) -> str | None:
    row = stores_for(later_settings().database).index.job_index_get("default", job_id)
    return None if row is None else row.stage


def queue_rows(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_delivery_queue")
        return cursor.fetchone()[0]


def schedule_keys(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM later_storage WHERE {key_column(alias)} LIKE %s",
            ["default-due-%"],
        )
        return cursor.fetchone()[0]


# --- stages no worker holds: cancelled at once, never started ---


def test_a_cancelled_enqueued_job_never_starts(engine_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "ran")
    job = tasks.record.enqueue(path, "cancelled")
    kept = tasks.record.enqueue(path, "kept")
    assert api.cancel(job.id) == api.CANCELLED
    assert queue_rows(engine_db) == 1  # its message is gone, the other's stays
    run_burst()
    assert tasks.read_lines(path) == ["kept"]
    assert_cancelled(job.id)
    assert result(kept.id).status == TaskResultStatus.SUCCESSFUL
    assert result(job.id).errors[-1].traceback == "cancelled by an operator"


def test_a_cancelled_delayed_job_never_starts_and_loses_its_schedule_entry(
    engine_db: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "ran")
    job = tasks.record.using(run_after=later_in(0.3)).enqueue(path, "late")
    assert schedule_keys(engine_db) == 1
    assert api.cancel(job.id) == api.CANCELLED
    assert schedule_keys(engine_db) == 0
    time.sleep(0.4)
    run_burst()
    assert tasks.read_lines(path) == []
    assert_cancelled(job.id)


def test_a_cancelled_requeued_job_is_not_retried(engine_db: str, tmp_path: Path) -> None:
    marker = str(tmp_path / "marker")
    job = tasks.fail_first_time.enqueue(marker)
    run_burst()
    assert stored_stage(job.id) == "requeued"
    assert api.cancel(job.id) == api.CANCELLED
    run_until_finished([job.id])
    assert_cancelled(job.id)
    assert tasks.read_lines(marker) == ["failed"]  # it never ran again
    # The first attempt's error is kept before the cancel's.
    assert [e.exception_class_path for e in result(job.id).errors][-1] == CANCELLED_PATH
    assert len(result(job.id).errors) == 2


def test_cancelling_a_waiting_child_keeps_it_from_running(engine_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "ran")
    parent = tasks.record.enqueue(path, "parent")
    child = api.continue_with(parent.id, tasks.record, path, "child")
    assert api.cancel(child.id) == api.CANCELLED
    run_burst()
    assert tasks.read_lines(path) == ["parent"]
    assert_cancelled(child.id)


def test_children_of_a_cancelled_parent(engine_db: str, tmp_path: Path) -> None:
    """``on="success"`` children fail with "parent <id> cancelled"; ``on="finish"``
    children run; a child added after the cancel behaves the same."""
    path = str(tmp_path / "ran")
    parent = tasks.record.using(run_after=later_in(60)).enqueue(path, "parent")
    on_success = api.continue_with(parent.id, tasks.record, path, "on success")
    on_finish = api.continue_with(parent.id, tasks.record, path, "on finish", on="finish")
    assert api.cancel(parent.id) == api.CANCELLED
    late = api.continue_with(parent.id, tasks.record, path, "late on success")
    run_burst()
    assert tasks.read_lines(path) == ["on finish"]
    failed = result(on_success.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[-1].traceback == f"parent {parent.id} cancelled"
    assert result(late.id).errors[-1].traceback == f"parent {parent.id} cancelled"
    assert result(on_finish.id).status == TaskResultStatus.SUCCESSFUL


def test_a_finished_or_unknown_job_is_left_alone(engine_db: str, tmp_path: Path) -> None:
    job = tasks.add.enqueue(1, 2)
    run_burst()
    assert api.cancel(job.id) == api.FINISHED
    assert result(job.id).status == TaskResultStatus.SUCCESSFUL
    assert result(job.id).return_value == 3
    assert api.cancel("01JNOSUCHJOB0000000000000") == api.MISSING
    assert api.cancel_many([job.id, job.id, "nope"]) == {job.id: api.FINISHED, "nope": "missing"}


def test_cancelled_is_counted_and_shown(engine_db: str) -> None:
    jobs = [tasks.add.enqueue(n, n) for n in range(3)]
    assert set(api.cancel_many([job.id for job in jobs]).values()) == {api.CANCELLED}
    overview = read_overview(engine_db, "default")
    assert overview.count("cancelled") == 3
    assert overview.count("enqueued") == 0


def test_a_task_raising_job_cancelled_is_cancelled_not_retried(engine_db: str) -> None:
    job = tasks.cancel_itself.enqueue()
    run_until_finished([job.id])
    assert_cancelled(job.id)
    assert len(result(job.id).errors) == 1
    assert result(job.id).errors[0].traceback == "the task raised JobCancelled"


def test_check_cancelled_does_nothing_outside_a_cancelled_task() -> None:
    api.check_cancelled()
    flag = cancellation.CancelFlag()
    with cancellation.running_with(flag):
        api.check_cancelled()
        flag.set()
        with pytest.raises(JobCancelled):
            api.check_cancelled()
    api.check_cancelled()


# --- requests a worker carries out ---


def test_a_requested_enqueued_job_is_cancelled_by_the_worker_that_claims_it(
    engine_db: str, tmp_path: Path
) -> None:
    """A request (as written when the job's message was claimed at the cancel's
    instant) makes the worker that meets the job write it cancelled, not start it."""
    path = str(tmp_path / "ran")
    job = tasks.record.enqueue(path, "requested")
    record = stores_for(engine_db).kv.get(f"default-job-{job.id}")
    assert record is not None
    writes = JobWrites("default")
    writes.add(cancellation.request(decode_record(record)))
    commit(writes, stores_for(engine_db))
    run_burst()
    assert tasks.read_lines(path) == []
    assert_cancelled(job.id)
    assert stores_for(engine_db).kv.get(cancel_request_key("default", job.id)) is None
    assert queue_rows(engine_db) == 0


# --- many at once ---


def test_cancel_jobs_takes_the_queued_jobs_of_one_task(engine_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "ran")
    doomed = [tasks.record.enqueue(path, f"r{n}") for n in range(7)]
    kept = [tasks.add.enqueue(n, 1) for n in range(3)]
    dry = api.cancel_jobs("enqueued", task=tasks.record, dry_run=True, batch_size=3)
    assert (dry.matched, dry.changed) == (7, 7)
    assert queue_rows(engine_db) == 10
    outcome = api.cancel_jobs("enqueued", task=tasks.record, batch_size=3)
    assert (outcome.matched, outcome.changed, outcome.refused) == (7, 7, 0)
    assert outcome.batches >= 3
    run_burst()
    assert tasks.read_lines(path) == []
    for job in doomed:
        assert_cancelled(job.id)
    assert all(result(job.id).status == TaskResultStatus.SUCCESSFUL for job in kept)


def test_later_jobs_cancel_takes_a_stage(engine_db: str, tmp_path: Path) -> None:
    delayed = [tasks.add.using(run_after=later_in(3600)).enqueue(n, 1) for n in range(4)]
    other_queue = tasks.add_on_emails.using(run_after=later_in(3600)).enqueue(1, 1)
    out = io.StringIO()
    call_command("later_jobs", "cancel", "--stage", "delayed", "--queue", "default", stdout=out)
    assert "cancelled 4 of 4 delayed job(s) selected" in out.getvalue()
    for job in delayed:
        assert_cancelled(job.id)
    assert stored_stage(other_queue.id) == "delayed"
    assert schedule_keys(engine_db) == 1


def test_cancel_jobs_refuses_a_finished_stage(engine_db: str) -> None:
    with pytest.raises(ValueError, match="cannot be cancelled"):
        api.cancel_jobs("success")


def test_a_record_that_cannot_be_decoded_is_reported_not_cancelled(engine_db: str) -> None:
    job = tasks.add.enqueue(1, 1)
    other = tasks.add.enqueue(2, 2)
    stores_for(engine_db).kv.set(f"default-job-{job.id}", b"\xc1 not msgpack")
    assert api.cancel_many([job.id, other.id]) == {job.id: "unreadable", other.id: "cancelled"}
