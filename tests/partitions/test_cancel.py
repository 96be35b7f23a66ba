"""Cancelling jobs on topic partitions, on both databases: the cancel is a request
that the worker holding the partition carries out, so a cancelled head leaves its
partition (the job behind it runs) and a requested job never starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from later_django import api
from later_django.compat.tasks import TaskResultStatus
from tests.engine.test_cancel import assert_cancelled
from tests.partitions import tasks as partition_tasks
from tests.partitions.conftest import TOPIC
from tests.partitions.test_running import run_until

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def later_in(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def result(job):  # type: ignore[no-untyped-def]
    return job.task.get_result(job.id)


def test_a_cancelled_partition_head_frees_its_partition(part_db: str, tmp_path: Path) -> None:
    """A delayed head blocks its partition; cancelled (a request, carried out by the
    worker holding the partition), it leaves, and the job behind it runs now."""
    path = str(tmp_path / "lines")
    head = api.enqueue_to_partition(
        TOPIC, "k", partition_tasks.record_key.using(run_after=later_in(3600)), path, "k", 0
    )
    behind = api.enqueue_to_partition(TOPIC, "k", partition_tasks.record_key, path, "k", 1)
    assert api.cancel(head.id) == api.REQUESTED
    run_until(lambda: result(behind).status == TaskResultStatus.SUCCESSFUL, timeout=20)
    assert [line["n"] for line in partition_tasks.read_lines(path)] == [1]
    assert_cancelled(head.id)


def test_a_requested_ready_partition_job_never_starts(part_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "lines")
    jobs = [
        api.enqueue_to_partition(TOPIC, "k", partition_tasks.record_key, path, "k", n)
        for n in range(3)
    ]
    assert api.cancel(jobs[1].id) == api.REQUESTED
    run_until(lambda: result(jobs[2]).status == TaskResultStatus.SUCCESSFUL, timeout=20)
    assert [line["n"] for line in partition_tasks.read_lines(path)] == [0, 2]
    assert_cancelled(jobs[1].id)
