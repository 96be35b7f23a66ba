"""The plans PostgreSQL picks for the partition statements of a worker's finish."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections, transaction

from later_django.storage.partitions import PartitionEntry
from later_django.storage.queries.partitions import PartitionQueries
from later_django.storage.stores import stores_for
from tests.conftest import use_database
from tests.partitions.conftest import NAMESPACE
from tests.partitions.support import fetch

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: The burst of ``bench.py --scenarios partition_drain``: 20,000 rows over 16
#: partitions of a topic, ids the length of a job id (a ULID).
ROWS, PARTITIONS, BURST_TOPIC = 20_000, 16, "bench_ordered"
#: Partitions a finish advances: those of one of its two worker processes.
BATCH = 8


def _job_id(n: int) -> str:
    return f"01M90V7PC014X392CPZP{n:06d}"


def _rows_read(plan: dict[str, Any]) -> int:
    """Rows the plan's nodes read and threw away (``Rows Removed by Filter`` and
    ``by Index Recheck``), over the whole tree."""
    removed = plan.get("Rows Removed by Filter", 0) + plan.get("Rows Removed by Index Recheck", 0)
    return removed + sum(_rows_read(child) for child in plan.get("Plans", []))


def test_advance_deletes_the_leaving_rows_by_job_id_whatever_the_statistics(
    request: pytest.FixtureRequest,
) -> None:
    """A finish's ``advance`` finds the finished jobs' rows (and the rows whose time
    moves) through the ``(namespace, job_id)`` index, not by reading every row of the
    namespace. On a table never analyzed, filled by a burst (what
    ``bench.py --scenarios partition_drain`` drains), ``namespace = … AND job_id =
    ANY(…)`` with 8 ids was planned as a bitmap scan of the whole namespace: 20,000
    rows read per finish, 3-4 ms of a 5 ms finish. Checked with custom and generic
    plans (a worker's statements are prepared)."""
    alias = use_database(request, "postgres")
    superuser = fetch(alias, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    if not superuser or not superuser[0][0]:
        pytest.skip("dropping a table's statistics takes a superuser")
    stores = stores_for(alias)
    stores.partitions.enter(
        NAMESPACE,
        [
            PartitionEntry(BURST_TOPIC, n % PARTITIONS, n, _job_id(n), 1_000, "enqueued")
            for n in range(1, ROWS + 1)
        ],
    )
    statement = stores.driver.queries(PartitionQueries).advance
    params = {
        "topic": [BURST_TOPIC] * BATCH,
        "partition_id": list(range(1, BATCH + 1)),
        "namespace": NAMESPACE,
        # The head of each partition leaves; the row behind it gets a new time.
        "exits": [_job_id(n) for n in range(1, BATCH + 1)],
        "moved": [_job_id(PARTITIONS + n) for n in range(1, BATCH + 1)],
        "moved_at": [5_000] * BATCH,
    }
    with transaction.atomic(using=alias):
        with connections[alias].cursor() as cursor:
            # As on a table never analyzed (rolled back with the rest).
            cursor.execute(
                "DELETE FROM pg_statistic WHERE starelid = 'later_partition_job'::regclass"
            )
            cursor.execute(
                "UPDATE pg_class SET reltuples = -1, relpages = 0 "
                "WHERE oid = 'later_partition_job'::regclass"
            )
        for mode in ("force_custom_plan", "force_generic_plan"):
            with connections[alias].cursor() as cursor:
                cursor.execute(f"SET LOCAL plan_cache_mode = {mode}")
            rows = stores.driver.fetch_all("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
            plan = rows[0][0][0]["Plan"]
            assert _rows_read(plan) < 10, (mode, plan)
        transaction.set_rollback(True, using=alias)
