"""Helpers of the engine tests: run workers, read results, count rows."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from django.db import connections

from later_django.compat.tasks import TaskResult, default_task_backend
from later_django.worker.runner import Worker, WorkerOptions

NAMESPACE = "default"
ENGINE_TABLES = ("later_storage", "later_jobs_index", "later_delivery_queue")


def run_burst(queues: Sequence[str] = ("default",), concurrency: int = 4) -> None:
    """Runs one burst worker in this process until nothing is ready."""
    options = WorkerOptions(queues=list(queues), burst=True, concurrency=concurrency)
    assert Worker(options).run() == 0


def result(result_id: str) -> TaskResult:
    return default_task_backend.get_result(result_id)


def run_until_finished(
    result_ids: Iterable[str],
    *,
    queues: Sequence[str] = ("default",),
    concurrency: int = 4,
    timeout: float = 15.0,
) -> list[TaskResult]:
    """Runs burst workers until every job in ``result_ids`` has finished (a burst
    worker exits while a retry is still waiting for its delay); fails the test
    after ``timeout`` seconds."""
    ids = list(result_ids)
    deadline = time.monotonic() + timeout
    while True:
        run_burst(queues, concurrency)
        results = [result(result_id) for result_id in ids]
        if all(found.is_finished for found in results):
            return results
        if time.monotonic() > deadline:
            unfinished = {found.id: found.status for found in results if not found.is_finished}
            raise AssertionError(f"jobs not finished after {timeout}s: {unfinished}")
        time.sleep(0.02)


def row_counts(alias: str, tables: Sequence[str] = ENGINE_TABLES) -> dict[str, int]:
    with connections[alias].cursor() as cursor:
        counts = {}
        for table in tables:
            cursor.execute(f"SELECT COUNT(*) FROM {table}")
            counts[table] = cursor.fetchone()[0]
    return counts


def no_rows(tables: Sequence[str] = ENGINE_TABLES) -> dict[str, int]:
    return dict.fromkeys(tables, 0)


def key_column(alias: str) -> str:
    """``later_storage``'s ``key`` column as ``alias``'s SQL names it: quoted (a
    reserved word on MySQL/MariaDB)."""
    return connections[alias].ops.quote_name("key")


def counter_value(alias: str, key: str) -> int | None:
    """The counter of the counter-only ``later_storage`` row ``key`` (None: no row)."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            f"SELECT counter_value FROM later_storage WHERE {key_column(alias)} = %s", [key]
        )
        row = cursor.fetchone()
    return None if row is None else row[0]
