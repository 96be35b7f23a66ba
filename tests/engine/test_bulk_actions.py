"""Bulk actions on stored jobs: ``api.retry_failed``, ``api.delete_jobs`` and
``manage.py later_jobs``, in bounded batches, on both databases."""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from later_django import api
from later_django.compat.tasks import TaskResultStatus
from later_django.engine.job_actions import bulk, one_job, record_checks
from later_django.engine.job_actions.selection import BulkOutcome, JobSelection
from later_django.exceptions import ActionRefused
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE, result, run_burst

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def counts(alias: str) -> dict[str, int]:
    return stores_for(alias).index.job_index_stage_counts(NAMESPACE)


def fail_jobs(task, n: int) -> list[str]:
    """``n`` jobs of ``task`` (one that fails without retries), run until failed."""
    ids = api.enqueue_many(task, [((f"boom {i}",), {}) for i in range(n)], ids_only=True)
    run_burst(queues=(task.queue_name,), concurrency=8)
    return ids


def failed_children(n: int) -> tuple[str, list[str]]:
    """A parent that fails and its ``n`` continuations of ``tasks.add`` (``on="success"``),
    failed with it in its finishing transaction: many failed jobs, made quickly by
    the engine's own path."""
    parent = tasks.fail_once_without_retry.enqueue("parent")
    backend = tasks.add.get_backend()
    calls = [((i, 0), {}) for i in range(n)]
    jobs = [
        dataclasses.replace(job, parent_job_id=parent.id, run_on="success")
        for job in backend.new_jobs(tasks.add, calls)
    ]
    ids = backend.write_job_ids(jobs)
    run_burst()
    return parent.id, ids


def test_retry_failed_takes_ten_thousand_failed_jobs_in_bounded_batches(engine_db: str) -> None:
    _parent, ids = failed_children(10_000)
    assert counts(engine_db) == {"failed": 10_001}

    outcome = api.retry_failed(task=tasks.add, batch_size=1_000)

    assert (outcome.matched, outcome.changed, outcome.refused) == (10_000, 10_000, 0)
    assert outcome.batches == 10, "one transaction per 1,000 jobs"
    assert counts(engine_db) == {"enqueued": 10_000, "failed": 1}
    assert stores_for(engine_db).queue.depth(NAMESPACE) == 10_000
    assert {result(i).status for i in (ids[0], ids[4_999], ids[-1])} == {TaskResultStatus.READY}
    again = api.retry_failed(task=tasks.add)
    assert (again.matched, again.changed, again.batches) == (0, 0, 0)


def test_a_retried_job_runs_once_more_and_keeps_its_first_error(engine_db: str) -> None:
    ids = fail_jobs(tasks.fail_once_without_retry, 3)
    assert api.retry_failed().changed == 3
    run_burst()
    assert counts(engine_db) == {"failed": 3}, "each ran once more and failed again"
    assert [len(result(i).errors) for i in ids] == [2, 2, 2]


def test_retry_failed_selects_by_task_queue_and_time(engine_db: str) -> None:
    on_default = fail_jobs(tasks.fail_once_without_retry, 3)
    on_emails = fail_jobs(tasks.fail_once_without_retry.using(queue_name="emails"), 2)
    time.sleep(0.01)
    cut = timezone.now()
    time.sleep(0.01)
    newer = fail_jobs(tasks.fail_once_without_retry, 2)
    other_task = tasks.fail_always.using(queue_name="emails")
    other_ids = api.enqueue_many(other_task, [(("x",), {})], ids_only=True)
    for _ in range(3):  # its two retries, 0.2 s apart
        run_burst(queues=("emails",))
        time.sleep(0.25)
    assert result(other_ids[0]).status == TaskResultStatus.FAILED

    assert api.retry_failed(since=cut, dry_run=True).changed == 3
    assert api.retry_failed(queue="emails", dry_run=True).changed == 3
    assert api.retry_failed(task=tasks.fail_always, dry_run=True).changed == 1
    assert api.retry_failed(task="tests.engine.tasks.fail_always", dry_run=True).changed == 1
    assert counts(engine_db) == {"failed": 8}, "a dry run writes nothing"

    assert api.retry_failed(queue="emails", task=tasks.fail_once_without_retry).changed == 2
    assert [result(i).status for i in on_emails] == [TaskResultStatus.READY] * 2
    assert api.retry_failed(since=cut, task=tasks.fail_once_without_retry).changed == 2
    assert [result(i).status for i in newer] == [TaskResultStatus.READY] * 2
    assert [result(i).status for i in on_default] == [TaskResultStatus.FAILED] * 3
    assert result(other_ids[0]).status == TaskResultStatus.FAILED


def test_delete_jobs_deletes_a_stage_and_refuses_a_parent_with_waiting_children(
    engine_db: str,
) -> None:
    failed = fail_jobs(tasks.fail_once_without_retry, 4)
    hour = timezone.now() + timedelta(hours=1)
    delayed = [tasks.add.using(run_after=hour).enqueue(n, 1).id for n in range(3)]
    child = api.continue_with(delayed[0], tasks.add, 1, 2).id

    dry = api.delete_jobs("delayed", dry_run=True)
    assert (dry.matched, dry.changed, dry.refused) == (3, 2, 1)
    assert dry.refusals == [
        f"job {delayed[0]} has 1 continuation(s) waiting for it; delete those first"
    ]
    outcome = api.delete_jobs("delayed", batch_size=2)
    assert (outcome.changed, outcome.refused, outcome.batches) == (2, 1, 2)
    assert counts(engine_db) == {"failed": 4, "delayed": 1, "waiting": 1}

    assert api.delete_jobs("waiting").changed == 1
    assert api.delete_jobs("delayed").changed == 1, "its continuation is gone"
    assert api.delete_jobs("failed", task=tasks.add).matched == 0
    assert api.delete_jobs("failed").changed == 4
    assert counts(engine_db) == {}
    assert stores_for(engine_db).index.job_index_get(NAMESPACE, failed[0]) is None
    assert stores_for(engine_db).index.job_index_get(NAMESPACE, child) is None


def test_bulk_actions_refuse_stages_they_cannot_take(engine_db: str) -> None:
    with pytest.raises(ValueError, match="jobs of stage 'running' cannot be deleted in bulk"):
        api.delete_jobs("running")
    with pytest.raises(ValueError, match="stage 'finished' is not a stage"):
        api.delete_jobs("finished")
    with pytest.raises(ValueError, match="batch_size must be at least 1, not 0"):
        api.retry_failed(batch_size=0)


def test_the_later_jobs_command_retries_and_deletes(engine_db: str) -> None:
    fail_jobs(tasks.fail_once_without_retry, 3)

    out = StringIO()
    call_command("later_jobs", "retry", "--dry-run", stdout=out)
    assert out.getvalue().strip() == (
        "would retry 3 of 3 failed job(s) selected, in 1 batch(es); refused 0"
    )
    assert counts(engine_db) == {"failed": 3}

    out = StringIO()
    call_command("later_jobs", "retry", "--batch-size", "2", stdout=out)
    assert out.getvalue().strip() == (
        "retried 3 of 3 failed job(s) selected, in 2 batch(es); refused 0"
    )
    run_burst()
    out = StringIO()
    since = timezone.localtime(timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
    call_command(
        "later_jobs",
        "delete",
        "--stage",
        "failed",
        "--queue",
        "default",
        "--since",
        since,
        stdout=out,
    )
    assert out.getvalue().strip() == (
        "deleted 3 of 3 failed job(s) selected, in 1 batch(es); refused 0"
    )
    assert counts(engine_db) == {}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["delete"], "delete needs --stage, one of delayed, waiting, requeued, success, failed"),
        (["retry", "--stage", "delayed"], "retry takes failed jobs only, not --stage 'delayed'"),
        (["retry", "--since", "x"], "--since: 'x' is not an ISO 8601 date and time"),
        (["delete", "--stage", "enqueued"], "jobs of stage 'enqueued' cannot be deleted in bulk"),
    ],
)
def test_the_later_jobs_command_names_a_bad_option(
    engine_db: str, arguments: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        call_command("later_jobs", *arguments)


def test_a_bulk_retry_skips_a_job_that_left_the_stage_since_its_page_was_read(
    engine_db: str,
) -> None:
    """The page is read, then each batch locks its records: a job retried by
    someone else in between is refused with its new stage, not retried twice."""
    ids = fail_jobs(tasks.fail_once_without_retry, 2)
    stores = stores_for(engine_db)
    page = stores.index.job_index_list_by_stage(NAMESPACE, "failed", None, 10)
    assert len(page.items) == 2
    one_job.retry_failed(engine_db, NAMESPACE, ids[0])
    outcome = BulkOutcome()
    bulk._act_on_batch(
        record_checks.retry_record,
        [row.job_id for row in page.items],
        JobSelection(stage="failed"),
        stores,
        NAMESPACE,
        outcome,
        dry_run=False,
    )
    assert (outcome.matched, outcome.changed, outcome.refused) == (2, 1, 1)
    assert outcome.refusals == [f"job {ids[0]} is 'enqueued' now, no longer 'failed'"]
    assert stores.queue.depth(NAMESPACE) == 2


def test_the_stand_in_of_an_undecodable_record_is_refused_by_retry(engine_db: str) -> None:
    """A record that could not be decoded is replaced by a failed stand-in with no
    queue: there is nothing to run again, alone or in bulk, and it costs no extra
    read to know (the refusal comes from the record itself)."""
    from later_django.conf import later_settings
    from later_django.core.clock import now_ms
    from later_django.engine import moves
    from later_django.engine.writes import JobWrites, commit

    stores = stores_for(engine_db)
    writes = JobWrites(NAMESPACE)
    stand_in = moves.replace_undecodable(
        writes,
        NAMESPACE,
        "01STANDIN0000000000000000A",
        "tests.engine.tasks.add",
        b"\xc1 not msgpack",
        "the record could not be decoded",
        now_ms(),
        later_settings(),
    )
    commit(writes, stores)
    ids = fail_jobs(tasks.fail_once_without_retry, 1)

    with pytest.raises(ActionRefused, match="nothing to run again"):
        one_job.retry_failed(engine_db, NAMESPACE, stand_in.job_id)
    outcome = api.retry_failed()

    assert (outcome.matched, outcome.changed, outcome.refused) == (2, 1, 1)
    assert "nothing to run again" in outcome.refusals[0]
    assert counts(engine_db) == {"enqueued": 1, "failed": 1}
    assert result(ids[0]).status == TaskResultStatus.READY
