"""The statements of a partition finish that starts the next heads (``slots`` > 0):
how many, and that the continuations read with the fence still move them."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from later_django.api import continue_with, enqueue_to_partition
from later_django.conf import later_settings
from later_django.core.clock import now_ms
from later_django.core.topics import partition_for_key
from later_django.engine.execution.finish import finish_and_continue
from later_django.engine.execution.heads import start_heads
from later_django.engine.execution.values import Outcome, StartedJob
from later_django.storage.postgres import WORKER_PREPARE_THRESHOLD
from later_django.storage.stores import stores_for
from tests.partitions import tasks
from tests.partitions.conftest import NAMESPACE, PARTITIONS, TOPIC, TOPICS
from tests.partitions.support import record_of

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

OWNER = "w"


def _keys_on_distinct_partitions(count: int) -> list[str]:
    keys: dict[int, str] = {}
    n = 0
    while len(keys) < count:
        keys.setdefault(partition_for_key(f"k{n}", PARTITIONS), f"k{n}")
        n += 1
    return list(keys.values())


def _start_heads(alias: str) -> list[StartedJob]:
    """Takes every partition for ``OWNER`` and starts their runnable heads."""
    stores = stores_for(alias)
    now = now_ms()
    stores.partitions.take(
        NAMESPACE, OWNER, [(TOPIC, p) for p in range(PARTITIONS)], now + 30_000, now
    )
    claims = stores.partitions.claim_heads(NAMESPACE, OWNER, now, [], 16)
    return start_heads(
        claims,
        stores=stores,
        namespace=NAMESPACE,
        worker_id=OWNER,
        lease_ms=30_000,
        settings=later_settings(),
    )


def _finish(
    alias: str, started: list[StartedJob], *, captured: bool = True
) -> tuple[list[StartedJob], list[str]]:
    """Finishes ``started`` (successes) with slots for their next heads; returns the
    jobs started and, when ``captured``, the statements run (capturing them runs
    each unprepared)."""
    capture = CaptureQueriesContext(connections[alias])
    with capture if captured else nullcontext():
        _, following = finish_and_continue(
            [Outcome(job, return_value=None) for job in started],
            stores=stores_for(alias),
            namespace=NAMESPACE,
            worker_id=OWNER,
            settings=later_settings(),
            slots=8,
        )
    return following, [query["sql"] for query in capture.captured_queries] if captured else []


def _enqueue_rounds(keys: list[str], rounds: int, path: str) -> None:
    """``rounds`` jobs per key, enqueued round by round (each key's partition in order)."""
    for n in range(rounds):
        for key in keys:
            enqueue_to_partition(TOPIC, key, tasks.record_key, path, key, n)


def _is_transaction_control(sql: str) -> bool:
    return sql.strip().upper() in {"BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"}


def test_a_finish_reads_its_jobs_continuations_with_the_fence(part_db: str, tmp_path: Path) -> None:
    """Three partitions, two jobs each: the finish of the three heads starts the three
    next ones. On PostgreSQL it runs four statements (the outcomes, the fence with the
    next rows and the finished jobs' continuations, the starts, the heads' advance);
    before, the continuations were read in a statement of their own between the first
    two. On SQLite (one statement per table, inside its write lock) the three leases
    are renewed in one statement (before, one each) and the continuations are read
    after the fence. On MySQL (SQLite's shapes, decision 255) the fence is a write and
    the read that answers what ``RETURNING`` would (decision 223): fifteen statements
    where SQLite runs fourteen (PostgreSQL four), the leases still renewed in one."""
    _enqueue_rounds(_keys_on_distinct_partitions(3), 2, str(tmp_path / "lines"))
    started = _start_heads(part_db)
    assert len(started) == 3

    following, statements = _finish(part_db, started)

    assert sorted(job.record.partition_id for job in following) == sorted(
        job.record.partition_id for job in started
    )
    assert all(record_of(part_db, job.record.job_id).stage == "running" for job in following)
    run = [sql for sql in statements if not _is_transaction_control(sql)]
    ranges_read = [sql for sql in run if "later_storage_range" in sql]
    assert len(ranges_read) == 1, run
    # The three partition leases are renewed in one statement (SQLite ran one each).
    leases = [n for n, sql in enumerate(run) if "later_partition_lease" in sql]
    vendor = connections[part_db].vendor
    if vendor == "mysql":
        # The renewal, then its read back (the leases it kept), right after it.
        assert len(leases) == 2 and leases[1] == leases[0] + 1, run
        assert run[leases[0]].startswith("UPDATE ") and run[leases[1]].startswith("SELECT "), run
        assert len(run) == 15, run
    else:
        assert len(leases) == 1, run
    if vendor == "postgresql":
        assert len(run) == 4, run
        assert "later_partition_lease" in ranges_read[0], run


def test_a_continuation_behind_its_parent_starts_in_the_parents_finish(
    part_db: str, tmp_path: Path
) -> None:
    """The fence's statement finds the parent's continuation; once it is moved ready the
    partition's next row is read again, so the child starts in the same transaction
    (as when the continuations were read before the fence)."""
    path = str(tmp_path / "lines")
    parent = enqueue_to_partition(TOPIC, "k", tasks.record_key, path, "k", 0)
    child = continue_with(parent, tasks.record_key, path, "k", 1)
    [started] = _start_heads(part_db)
    assert started.record.job_id == parent.id
    assert record_of(part_db, child.id).stage == "waiting"

    following, _ = _finish(part_db, [started])

    assert record_of(part_db, parent.id).stage == "success"
    assert [job.record.job_id for job in following] == [child.id]
    assert record_of(part_db, child.id).stage == "running"


def test_a_finishs_advance_runs_its_generic_plan_once_prepared(
    postgres_alias: str, tmp_path: Path
) -> None:
    """A worker's statements are prepared (decision 106). PostgreSQL costs ``advance``'s
    generic plan for arrays of 10 and a finish passes fewer, so it chose a custom plan
    at every run, planning the statement each time (~1 ms, more than it then ran). The
    fence's statement sets ``plan_cache_mode`` for the rest of the finish's transaction:
    every run of the prepared ``advance`` uses the generic plan."""
    connections[postgres_alias].close()  # a session with nothing prepared yet
    later = {"NAMESPACE": NAMESPACE, "DATABASE": postgres_alias, "TOPICS": TOPICS}
    try:
        with override_settings(LATER=later):
            connections[postgres_alias].ensure_connection()
            stores_for(postgres_alias).driver.keep_statements_prepared()
            _enqueue_rounds(_keys_on_distinct_partitions(2), 8, str(tmp_path / "lines"))
            started = _start_heads(postgres_alias)
            finishes = 0
            while started:
                started, _ = _finish(postgres_alias, started, captured=False)
                finishes += 1
            assert finishes == 8
            with connections[postgres_alias].cursor() as cursor:
                cursor.execute(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE 'WITH affected AS%%'"
                )
                [(generic, custom)] = cursor.fetchall()
        # Prepared after its first WORKER_PREPARE_THRESHOLD runs (psycopg's count).
        assert custom == 0 and generic >= finishes - WORKER_PREPARE_THRESHOLD, (generic, custom)
    finally:
        connections[postgres_alias].close()  # the next test's session prepares nothing
