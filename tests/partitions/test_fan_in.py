"""Fan-in (``api.after``) over partitioned parents: the partition finish path (fenced)
moves the child too, and the child enters no partition."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import override_settings

from later_django.api import after, enqueue_to_partition
from later_django.compat.tasks import TaskResultStatus
from tests.partitions import tasks
from tests.partitions.conftest import NAMESPACE, TOPICS
from tests.partitions.support import record_of
from tests.partitions.test_running import run_until, status

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_a_child_of_partitioned_and_queue_parents_runs_after_all_of_them(
    part_db: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "lines")
    first = enqueue_to_partition("orders", "a", tasks.slow_record_key, path, "a", 0, 0.2)
    second = enqueue_to_partition("orders", "b", tasks.record_key, path, "b", 1)
    plain = tasks.record_key.enqueue(path, "q", 2)
    child = after([first, second, plain], tasks.record_key, path, "child", 3)

    run_until(lambda: status(child) == TaskResultStatus.SUCCESSFUL)

    lines = [line["n"] for line in tasks.read_lines(path)]
    assert lines[-1] == 3
    assert sorted(lines[:-1]) == [0, 0, 1, 2]
    record = record_of(part_db, child.id)
    assert record.topic is None and record.partition_id is None
    assert record.parent_job_ids == [first.id, second.id, plain.id]


def test_a_failed_partitioned_parent_fails_the_child_at_once(part_db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "lines")
    later = {
        "NAMESPACE": NAMESPACE,
        "DATABASE": part_db,
        "TOPICS": TOPICS,
        "RETRY": {"max_retries": 0},
    }
    with override_settings(LATER=later):
        failing = enqueue_to_partition("orders", "a", tasks.always_fails, path, "a", 0)
        waiting = enqueue_to_partition("orders", "b", tasks.slow_record_key, path, "b", 1, 0.3)
        child = after([failing, waiting], tasks.record_key, path, "child", 3)
        run_until(lambda: status(child) == TaskResultStatus.FAILED)

    error = child.task.get_result(child.id).errors[0]
    assert f"parent {failing.id} failed" in error.traceback
    assert all(line["n"] != 3 for line in tasks.read_lines(path))
