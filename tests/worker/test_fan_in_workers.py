"""Fan-in with real ``later_worker`` processes: 200 parents finish on two workers at
once, and each of their fan-in children runs exactly once (``api.after``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from django.db import transaction

from later_django.api import after, enqueue_many
from later_django.compat.tasks import TaskResultStatus
from tests.storage.three_databases import key_column
from tests.worker import tasks
from tests.worker.tasks import read_lines
from tests.worker.test_worker_process import (
    START_SECONDS,
    Workers,
    fetch,
    finished,
    wait_for,
    worker_rows,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

PARENTS = 200


def test_children_of_200_parents_finishing_on_two_workers_run_exactly_once(
    alias: str, workers: Workers, lines: Path
) -> None:
    for _ in range(2):
        workers.start(alias, "--concurrency", "8", later={"RETRY": {"max_retries": 0}})
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two workers up", workers)
    path = str(lines)

    with transaction.atomic(using=alias):
        parents = enqueue_many(
            tasks.record, [([path, f"p{n}"], {}) for n in range(PARENTS)], ids_only=True
        )
        on_success = after(parents, tasks.record, path, "on success")
        on_finish = after(parents, tasks.record, path, "on finish", on="finish")
        # Also failed by the last parent of its 200 that fails: a parent of its own.
        failing = tasks.fail_always.enqueue(path, "failing")
        doomed = after([*parents, failing.id], tasks.record, path, "doomed")

    for child in (on_success, on_finish):
        done = wait_for(lambda c=child: finished(c), 60.0, "the fan-in child ran", workers)
        assert done.status == TaskResultStatus.SUCCESSFUL, workers.logs()
        assert len(done.worker_ids) == 1
    failed = wait_for(lambda: finished(doomed), 60.0, "the doomed child failed", workers)
    assert failed.status == TaskResultStatus.FAILED
    assert f"parent {failing.id} failed" in failed.errors[0].traceback

    ran = Counter(line["label"] for line in read_lines(lines))
    assert ran["on success"] == 1
    assert ran["on finish"] == 1
    assert ran["doomed"] == 0
    assert sum(ran[f"p{n}"] for n in range(PARENTS)) == PARENTS
    # Both workers finished parents, and no pending counter is left.
    assert len({line["pid"] for line in read_lines(lines)}) == 2
    key = key_column(alias)
    assert fetch(
        alias, f"SELECT COUNT(*) FROM later_storage WHERE {key} LIKE %s", ["%-pending"]
    ) == [(0,)]


def test_a_fan_in_child_run_by_a_worker_process_gets_its_three_parents_results(
    alias: str, workers: Workers, lines: Path
) -> None:
    for _ in range(2):
        workers.start(alias, "--concurrency", "4")
    wait_for(lambda: len(worker_rows(alias)) == 2, START_SECONDS, "two workers up", workers)
    path = str(lines)

    with transaction.atomic(using=alias):
        parents = [tasks.record.enqueue(path, {"parent": n}) for n in range(3)]
        child = after(parents[::-1], tasks.record_parent_results, path, "child")

    done = wait_for(lambda: finished(child), 60.0, "the fan-in child ran", workers)
    assert done.status == TaskResultStatus.SUCCESSFUL, workers.logs()
    expected = [[parent.id, {"parent": n}] for n, parent in reversed(list(enumerate(parents)))]
    assert done.return_value == expected
    [line] = [line for line in read_lines(lines) if line["label"] == "child"]
    assert line["parent_results"] == expected
    # The parents are let go once their child has finished.
    key = key_column(alias)
    assert fetch(
        alias, f"SELECT COUNT(*) FROM later_storage WHERE {key} LIKE %s", ["%-dependents"]
    ) == [(0,)]
